// expect: cannot be called with these arguments
#include <coil/compile.h>

int main() {
  auto f = coil::compile([](const coil::Tensor& x) { return x; });
  coil::Tensor x;
  f(x, x);
}
