// The first program a newcomer runs: compile sin(x)^2 + cos(x)^2 and watch what happens when.
// scripts/demo.sh runs it with COIL_LOGS set to show each stage's output: the captured graph,
// the graph after decompositions, the fusion decisions, the fused kernel, the generated C++
// and the wrapper that calls it, the compile timeline, guards and recompiles.
#include <coil/coil.h>

#include <iostream>

namespace {
void show_counters(const char* when) {
  std::cout << "  counters " << when << ":";
  for (const auto& [name, value] : coil::counters())
    if (value) std::cout << " " << name << "=" << value;
  std::cout << "\n";
}
}  // namespace

int main() {
  std::cout << std::unitbuf;  // interleave with the logs on stderr in order
  coil::manual_seed(0);
  auto f = [](const coil::Tensor& x) { return coil::sin(x).pow(2) + coil::cos(x).pow(2); };

  std::cout << "1. coil::compile(f) wraps f; nothing is captured or compiled yet.\n";
  auto cf = coil::compile(f, {.name = "f", .arg_names = {"x"}});
  show_counters("after compile()");

  std::cout << "2. The first call captures f's graph and compiles it: graph passes,\n"
               "   decompositions, lowering to the loop IR, fusion into one kernel, C++ code,\n"
               "   the system compiler (or the code cache); then it runs the kernel.\n";
  coil::Tensor x = coil::linspace(-3.0, 3.0, 8);
  coil::Tensor y = cf(x);
  std::cout << "  cf(x) = " << y << "\n";
  show_counters("after the first call");

  std::cout << "3. A call whose inputs satisfy the guards reuses the compiled graph.\n";
  cf(coil::randn({8}));
  show_counters("after a second call");

  std::cout
      << "4. A new input size breaks a guard: coil recompiles (COIL_LOGS=recompiles says why).\n";
  cf(coil::randn({16}));
  show_counters("after a call with 16 elements");

  std::cout << "5. Data-dependent control flow is a graph break: f runs in compiled segments.\n";
  auto halve = coil::compile(
      [](const coil::Tensor& x) {
        coil::Tensor y = x * 1.0;
        while (y.abs().amax().item<double>() > 1.0) y = y * 0.5;
        return y;
      },
      {.name = "halve"});
  std::cout << "  halve(full(4, 10.0)) = " << halve(coil::full({4}, 10.0)) << "\n";
  show_counters("at the end");
  return 0;
}
