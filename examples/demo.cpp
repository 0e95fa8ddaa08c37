// The first program a newcomer runs: eager tensors today; each compiler stage joins as it lands.
#include <coil/coil.h>

#include <iostream>

int main() {
  coil::manual_seed(0);
  coil::Tensor x = coil::linspace(-3.0, 3.0, 8);
  std::cout << "x               = " << x << "\n";
  std::cout << "sin(x)^2+cos(x)^2 = " << coil::sin(x).pow(2) + coil::cos(x).pow(2) << "\n";
  coil::Tensor m = coil::arange(6).view({2, 3});
  std::cout << "m               = " << m << "\n";
  std::cout << "m.t()           = " << m.t() << "\n";
  return 0;
}
