// Seed program 3 (the "custom toy"): a small model written by hand, two linear layers with a
// layer norm, a GELU and a residual connection, run on a few batches. Inference only: the
// compiled graph holds the weights as parameters (captured by reference, not copied).
//
// What fuses: each linear is a library call (addmm after the post-grad patterns); the bias
// add, layer norm and GELU around them fuse into generated kernels.
#include <coil/coil.h>

#include <iostream>

#include "check.h"

namespace {

struct ToyModel {
  coil::Tensor w1, b1, gamma, beta, w2, b2;

  explicit ToyModel(int64_t features, int64_t hidden)
      : w1(coil::randn({hidden, features}) * 0.3),
        b1(coil::randn({hidden}) * 0.1),
        gamma(coil::ones({hidden})),
        beta(coil::zeros({hidden})),
        w2(coil::randn({features, hidden}) * 0.2),
        b2(coil::randn({features}) * 0.1) {}

  coil::Tensor forward(const coil::Tensor& x) const {
    coil::Tensor h = coil::linear(x, w1, b1);
    h = coil::gelu(coil::layer_norm(h, {h.size(-1)}, gamma, beta));
    return x + coil::linear(h, w2, b2).tanh();  // a residual connection
  }
};

}  // namespace

int main() {
  std::cout << std::unitbuf;
  coil::manual_seed(0);
  ToyModel model(10, 32);
  auto compiled = coil::compile([&model](const coil::Tensor& x) { return model.forward(x); },
                                {.name = "toy", .arg_names = {"x"}});

  bool ok = true;
  for (int step = 0; step < 4; ++step) {
    coil::Tensor x = coil::randn({8, 10});
    coil::Tensor y = compiled(x);  // the first step compiles; the others reuse it
    std::cout << "step " << step << ": y[0] = " << y.select(0, 0) << "\n";
    ok = examples::check("  toy model, step " + std::to_string(step), y, model.forward(x)) && ok;
  }
  std::cout << "counters: " << examples::counters_line() << "\n";
  return ok ? 0 : 1;
}
