// expect: must return a Tensor, a std::vector<Tensor>, a number, or a std::tuple of Tensors and numbers
#include <coil/compile.h>

#include <string>

int main() {
  auto f = coil::compile([](const coil::Tensor&) { return std::string("no"); });
  coil::Tensor x;
  f(x);
}
