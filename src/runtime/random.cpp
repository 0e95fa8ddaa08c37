#include "runtime/random.h"

#include <cmath>
#include <mutex>
#include <random>

#include <coil/ops.h>

#include "runtime/copy.h"

namespace coil {

namespace {
struct Generator {
  std::mutex mutex;
  std::mt19937_64 engine{0x5eedc011u};
};
Generator& default_generator() {
  static Generator g;
  return g;
}
// 53 random bits as a double in [0, 1).
double uniform01(std::mt19937_64& e) { return static_cast<double>(e() >> 11) * 0x1.0p-53; }

// Draws `n` doubles with `draw`, in logical order, then converts them into dst.
template <typename Draw>
void fill_with(const Tensor& dst, Draw draw) {
  // On a GPU too: drawn on the host, so every device sees the same stream of numbers.
  Tensor tmp = empty_contiguous(dst.sizes(), kFloat64);
  double* p = tmp.data_ptr<double>();
  {
    Generator& g = default_generator();
    std::lock_guard<std::mutex> lock(g.mutex);
    for (int64_t i = 0; i < tmp.numel(); ++i) p[i] = draw(g.engine);
  }
  copy_into(dst, tmp);
}
}  // namespace

void manual_seed(uint64_t seed) {
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.engine.seed(seed);
}

void fill_uniform(const Tensor& dst, double low, double high) {
  bool is_float = dst.dtype() == kFloat32;
  fill_with(dst, [&](std::mt19937_64& e) {
    double u = low + (high - low) * uniform01(e);
    // Rounding to float32 must not produce `high` itself.
    if (is_float && static_cast<float>(u) >= static_cast<float>(high))
      u = std::nextafter(static_cast<float>(high), -INFINITY);
    return u;
  });
}

void fill_normal(const Tensor& dst, double mean, double stddev) {
  fill_with(dst, [&](std::mt19937_64& e) {
    // Box-Muller; 1 - u keeps the log argument in (0, 1].
    double u1 = 1.0 - uniform01(e), u2 = uniform01(e);
    return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  });
}

void fill_randint(const Tensor& dst, int64_t low, int64_t high) {
  uint64_t range = static_cast<uint64_t>(high - low);
  fill_with(dst, [&](std::mt19937_64& e) {
    return static_cast<double>(low + static_cast<int64_t>(e() % range));
  });
}

}  // namespace coil
