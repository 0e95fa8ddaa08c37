// expect: arguments must be Tensor, std::vector<Tensor>, integers, floating-point numbers or bool
#include <coil/compile.h>

#include <string>

int main() {
  auto f = coil::compile([](const coil::Tensor& x, const std::string&) { return x; });
  coil::Tensor x;
  f(x, std::string("name"));
}
