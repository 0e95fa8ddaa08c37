// expect: the callable must return a value
#include <coil/compile.h>

int main() {
  auto f = coil::compile([](const coil::Tensor&) {});
  coil::Tensor x;
  f(x);
}
