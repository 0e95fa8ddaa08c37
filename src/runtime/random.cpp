#include "runtime/random.h"

#include <cmath>
#include <mutex>

#include <coil/ops.h>

#include "runtime/copy.h"
#include "runtime/device_kernels.h"

namespace coil {

namespace {

constexpr uint64_t kDefaultSeed = 0x5eedc011u;
// Below this many elements a parallel region costs more than the draws.
constexpr int64_t kParallelDraws = 1 << 14;

struct Generator {
  std::mutex mutex;
  uint64_t seed = kDefaultSeed;
  uint64_t offset = 0;  // counters used so far
};
Generator& default_generator() {
  static Generator g;
  return g;
}

// 53 bits of two words as a double in [0, 1).
double unit(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((uint64_t{hi} << 32) | lo) >> 11) * 0x1.0p-53;
}

// Reserves dst's counters, then draws: on the CPU here, on a device by its kernel, into float64
// in logical order, converted into dst.
void fill_with(const Tensor& dst, RandomDraws d) {
  const int64_t n = dst.numel();
  {
    Generator& g = default_generator();
    std::lock_guard<std::mutex> lock(g.mutex);
    d.seed = g.seed;
    d.offset = g.offset;
    g.offset += static_cast<uint64_t>(n);
  }
  Tensor tmp = empty_contiguous(dst.sizes(), kFloat64, dst.device());
  if (dst.device().type == DeviceType::CPU) {
    double* p = tmp.data_ptr<double>();
#pragma omp parallel for schedule(static) if (n >= kParallelDraws)
    for (int64_t i = 0; i < n; ++i) p[i] = draw(d, static_cast<uint64_t>(i));
  } else if (n > 0) {
    device_kernels(dst.device().type, "random draws").random(tmp, d);
  }
  copy_into(dst, tmp);
}

}  // namespace

uint64_t random_counters_used() {
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  return g.offset;
}

std::array<uint32_t, 4> philox(uint64_t counter, uint64_t key) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0, p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

double draw(const RandomDraws& d, uint64_t i) {
  const std::array<uint32_t, 4> r = philox(d.offset + i, d.seed);
  switch (d.kind) {
    case Distribution::uniform: {
      double u = d.a + (d.b - d.a) * unit(r[0], r[1]);
      // Rounding to float32 must not produce `b` itself.
      if (d.below_float && static_cast<float>(u) >= static_cast<float>(d.b))
        u = std::nextafter(static_cast<float>(d.b), -INFINITY);
      return u;
    }
    case Distribution::normal: {
      // Box-Muller; 1 - u keeps the log argument in (0, 1].
      const double u1 = 1.0 - unit(r[0], r[1]), u2 = unit(r[2], r[3]);
      return d.a + d.b * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    }
    case Distribution::integer: {
      const uint64_t range = static_cast<uint64_t>(d.high - d.low);
      const uint64_t bits = (uint64_t{r[0]} << 32) | r[1];
      return static_cast<double>(d.low + static_cast<int64_t>(bits % range));
    }
  }
  return 0;
}

void manual_seed(uint64_t seed) {
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.seed = seed;
  g.offset = 0;
}

void fill_uniform(const Tensor& dst, double low, double high) {
  fill_with(dst, {Distribution::uniform, 0, 0, low, high, 0, 0, dst.dtype() == kFloat32});
}

void fill_normal(const Tensor& dst, double mean, double stddev) {
  fill_with(dst, {Distribution::normal, 0, 0, mean, stddev, 0, 0, false});
}

void fill_randint(const Tensor& dst, int64_t low, int64_t high) {
  fill_with(dst, {Distribution::integer, 0, 0, 0, 0, low, high, false});
}

}  // namespace coil
