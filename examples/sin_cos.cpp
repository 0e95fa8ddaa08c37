// Seed program 1, "when does the inductor code run?": f(x) = sin(x)^2 + cos(x)^2.
//
// coil::compile(f) only wraps f. The first call captures f's graph and runs the whole
// compiler (passes, decompositions, lowering, fusion into one kernel, C++ code, the system
// compiler or the code cache); later calls with inputs of the same dtype and shape run the
// compiled kernel, and a call that breaks a guard (another shape) compiles again. Run with
// COIL_LOGS=graph_code,fusion,output_code,timeline to watch each stage (docs/walkthrough.md).
// Its compile options write the debug folder, as the seed's do (docs/debugging.md).
#include <coil/coil.h>

#include <iostream>

#include "check.h"

int main() {
  std::cout << std::unitbuf;  // keep our lines in order with the logs on stderr
  auto f = [](const coil::Tensor& x) { return coil::sin(x).pow(2) + coil::cos(x).pow(2); };

  // As the seed's torch.compile(f, options={'trace.enabled': True, ...}): the debug folder for
  // this function, with the graph diagram (in ./coil_compile_debug, or $COIL_DEBUG_DIR).
  coil::CompileOptions options{.name = "f", .arg_names = {"x"}};
  options.options["trace.enabled"] = true;
  options.options["trace.graph_diagram"] = true;
  auto compiled_f = coil::compile(f, options);
  std::cout << "first spot: coil::compile(f) returned; counters: " << examples::counters_line()
            << "\n";

  coil::manual_seed(0);
  coil::Tensor x = coil::randn({1024});
  coil::Tensor y = compiled_f(x);
  std::cout << "second spot: compiled_f(x) captured and compiled f, then ran it; counters: "
            << examples::counters_line() << "\n";

  compiled_f(coil::randn({1024}));
  std::cout << "a second call ran the compiled kernel; counters: " << examples::counters_line()
            << "\n";

  // The graph was compiled for a float32 tensor of 1024 elements (its guards say so): another
  // size breaks a guard, and that call captures and compiles again.
  compiled_f(coil::randn({512}));
  std::cout << "a call with 512 elements compiled again; counters: " << examples::counters_line()
            << "\n";
  return examples::check("sin(x)^2 + cos(x)^2", y, f(x)) ? 0 : 1;
}
