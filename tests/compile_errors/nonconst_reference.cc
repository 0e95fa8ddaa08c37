// expect: parameters must be taken by value or by const reference
#include <coil/compile.h>

int main() {
  auto f = coil::compile([](coil::Tensor& x) { return x; });
  coil::Tensor x;
  f(x);
}
