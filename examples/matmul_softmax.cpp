// Seed program 2 (the "builtin fusion" toy): softmax(matmul(x, y), dim=1) on 100x100 inputs.
// The matmul is a library call (an extern kernel); the softmax's max, exp, sum and division
// fuse into one generated kernel that reads the matmul's result once per pass over a row.
#include <coil/coil.h>

#include <iostream>

#include "check.h"

int main() {
  std::cout << std::unitbuf;
  auto fn = [](const coil::Tensor& x, const coil::Tensor& y) {
    coil::Tensor z = coil::matmul(x, y);
    return coil::softmax(z, 1);
  };
  auto compiled_fn = coil::compile(fn, {.name = "fn", .arg_names = {"x", "y"}});

  coil::manual_seed(0);
  coil::Tensor a = coil::rand({100, 100}), b = coil::rand({100, 100});
  coil::Tensor out = compiled_fn(a, b);
  std::cout << out << "\n";
  std::cout << "counters: " << examples::counters_line() << "\n";
  return examples::check("softmax(matmul(x, y), 1)", out, fn(a, b)) ? 0 : 1;
}
