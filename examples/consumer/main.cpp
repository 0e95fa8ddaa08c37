// Uses coil through its installed package: #include <coil/coil.h>, link coil::coil.
#include <coil/coil.h>

#include <iostream>

int main() {
  coil::Tensor x = coil::arange(0, 6, 1, coil::kFloat32).view({2, 3});
  coil::Tensor y = coil::softmax(x, -1).sum({1});
  bool ok = coil::allclose(y, coil::ones({2}));
  std::cout << "consumer: softmax rows sum to one: " << (ok ? "yes" : "NO") << "\n";
  return ok ? 0 : 1;
}
