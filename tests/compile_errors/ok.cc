// expect: compiles
// The control: correct uses of coil::compile compile, so the failures next to it fail for
// the reason each names.
#include <coil/compile.h>

#include <tuple>

int main() {
  auto f = coil::compile([](const coil::Tensor& x, std::vector<coil::Tensor> xs, int64_t n,
                            double s, bool b) { return std::make_tuple(x, n * s, b, xs.size()); });
  coil::Tensor x;
  auto [y, scaled, flag, count] = f(x, std::vector<coil::Tensor>{x}, int64_t{2}, 1.5, true);
  (void)y, (void)scaled, (void)flag, (void)count;
  return 0;
}
