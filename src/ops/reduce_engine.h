// The loop behind every reduction: reduce a strided tensor over a set of dims into a contiguous
// output, one "reducer" describing the op.
//
// A reducer R for input element type T provides
//   using Acc; using Out;
//   Acc init() const;                                   // the empty reduction
//   Acc block(const T* p, int64_t n, int64_t r0) const;  // n contiguous elements, the first
//                                                       // at reduction index r0 (n >= 1)
//   void merge(Acc& a, const Acc& b) const;             // b covers indices after a's
//   Out finish(const Acc& a, int64_t n) const;          // n: reduction size
//   static constexpr bool kOrdered;                     // needs row-major order (argmax)
//
// The reduced elements of each output are visited in row-major order of the reduced dims when
// the reducer asks (so argmax's index is the logical flat index), else in memory order, in blocks
// of at most kBlock elements. Blocks that are not one contiguous run of memory are first gathered
// into a small buffer, so `block` only ever sees contiguous data; that keeps the reducers simple
// and vectorisable. When the reduced dims are far apart in memory and the kept innermost dim is
// close (reducing dim 0 of a row-major matrix), several neighbouring outputs ("lanes") are gathered
// together, so memory is read a cache line at a time instead of a column at a time.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "runtime/loops.h"

namespace coil::ops::reduce {

inline constexpr int64_t kBlock = 4096;  // elements per block (all lanes together)
// Lanes per item: wide when a reducer folds columns in place (256 bytes of each float row),
// narrower when lanes go through the gather buffer (whose rows then stay long).
inline constexpr int64_t kMaxLanes = 64;
inline constexpr int64_t kGatherLanes = 16;

// Some dims of a tensor as (size, stride) runs: size-1 dims dropped, neighbours merged where
// memory allows.
struct Dims {
  Shape sizes, strides;
};

inline Dims coalesce(const Tensor& x, const Shape& dims) {
  Dims d;
  for (int64_t dim : dims) {
    int64_t size = x.size(dim), stride = x.stride(dim);
    if (size == 1) continue;
    if (!d.sizes.empty() && d.strides.back() == stride * size) {
      d.sizes.back() *= size;
      d.strides.back() = stride;
    } else {
      d.sizes.push_back(size);
      d.strides.push_back(stride);
    }
  }
  return d;
}

// Walks the elements of `Dims` in row-major order from a starting linear index, tracking the
// element offset.
class Odometer {
 public:
  Odometer(const Dims& d, int64_t linear) : d_(d), idx_(d.sizes.size()) {
    for (size_t k = idx_.size(); k-- > 0;) {
      idx_[k] = linear % d_.sizes[k];
      linear /= d_.sizes[k];
      offset_ += idx_[k] * d_.strides[k];
    }
  }
  int64_t offset() const { return offset_; }
  // Elements left in the current innermost run, and that run's stride.
  int64_t run_left() const { return idx_.empty() ? 1 : d_.sizes.back() - idx_.back(); }
  int64_t run_stride() const { return idx_.empty() ? 0 : d_.strides.back(); }
  // Moves n <= run_left() elements on.
  void advance(int64_t n) {
    if (idx_.empty()) return;
    size_t k = idx_.size() - 1;
    idx_[k] += n;
    offset_ += n * d_.strides[k];
    while (idx_[k] == d_.sizes[k] && k > 0) {  // carry into the outer dims
      offset_ -= d_.sizes[k] * d_.strides[k];
      idx_[k] = 0;
      --k;
      ++idx_[k];
      offset_ += d_.strides[k];
    }
  }

 private:
  const Dims& d_;
  Shape idx_;
  int64_t offset_ = 0;
};

// How the outputs and reduced elements of one reduction are laid out in the input.
struct Plan {
  Dims kept, red;
  int64_t n_out = 1, n_red = 1;
  int64_t lanes = 1;  // outputs reduced together, neighbours along the innermost kept dim
  int64_t width = 1;  // size of the innermost kept dim
  int64_t lane_stride = 0;
  bool direct = false;  // each output's reduced elements are one contiguous run: no gather
  int64_t block() const { return direct ? kBlock : kBlock / lanes; }
  int64_t tiles_per_row() const { return (width + lanes - 1) / lanes; }
  int64_t items() const { return n_out / width * tiles_per_row(); }
};

// `ordered`: the reducer needs the reduced elements in logical order (argmax's index).
// Otherwise they are visited in memory order, which turns the reduction of a transposed
// tensor into one contiguous run.
inline Plan make_plan(const Tensor& x, const Shape& rdims, bool ordered, int64_t max_lanes) {
  Plan p;
  Shape kd, rd;
  for (int64_t d = 0; d < x.dim(); ++d) {
    bool reduced = std::find(rdims.begin(), rdims.end(), d) != rdims.end();
    (reduced ? rd : kd).push_back(d);
    (reduced ? p.n_red : p.n_out) *= x.size(d);
  }
  if (!ordered) {
    std::stable_sort(rd.begin(), rd.end(), [&](int64_t a, int64_t b) {
      return std::abs(x.stride(a)) > std::abs(x.stride(b));
    });
  }
  p.kept = coalesce(x, kd);
  p.red = coalesce(x, rd);
  if (!p.kept.sizes.empty()) {
    p.width = p.kept.sizes.back();
    p.lane_stride = p.kept.strides.back();
  }
  p.direct = p.red.sizes.empty() || (p.red.sizes.size() == 1 && p.red.strides[0] == 1);
  if (!p.direct && !p.kept.sizes.empty()) {
    int64_t nearest_red = std::abs(p.red.strides[0]);
    for (int64_t s : p.red.strides) nearest_red = std::min(nearest_red, std::abs(s));
    if (std::abs(p.lane_stride) < nearest_red) p.lanes = std::min(max_lanes, p.width);
  }
  return p;
}

// Reducers that fold element by element may also fold several lanes at once, reading the input
// in place instead of through the gather buffer:
//   void columns(const T* p, int64_t n, int64_t stride, int64_t lanes, int64_t lane_stride,
//                Acc* acc) const;  // acc[k] folds p[i * stride + k * lane_stride], i < n
template <typename R, typename T>
concept HasColumns = requires(const R& r, const T* p, typename R::Acc* acc) {
  r.columns(p, int64_t{}, int64_t{}, int64_t{}, int64_t{}, acc);
};

// The reduction loop for one reducer; see the top of this file.
template <typename T, typename R>
class Runner {
 public:
  using Acc = typename R::Acc;
  using Out = typename R::Out;

  Runner(const Tensor& x, const Plan& p, const R& red)
      : x_(static_cast<const T*>(x.data_ptr())), p_(p), red_(red) {}

  // A group of up to p.lanes outputs that are reduced together.
  struct Item {
    int64_t base = 0;  // input offset of the first lane's first reduced element
    int64_t out0 = 0;  // output index of the first lane
    int64_t lanes = 1;
  };

  Item item(int64_t i) const {
    int64_t tiles = p_.tiles_per_row();
    int64_t row = i / tiles, j0 = (i % tiles) * p_.lanes;
    Item it;
    it.out0 = row * p_.width + j0;
    it.lanes = std::min(p_.lanes, p_.width - j0);
    // Offset of `row` over the kept dims except the innermost.
    for (size_t k = p_.kept.sizes.size() - (p_.kept.sizes.empty() ? 0 : 1); k-- > 0;) {
      it.base += (row % p_.kept.sizes[k]) * p_.kept.strides[k];
      row /= p_.kept.sizes[k];
    }
    it.base += j0 * p_.lane_stride;
    return it;
  }

  int64_t num_blocks() const { return (p_.n_red + p_.block() - 1) / p_.block(); }

  // Folds blocks [b0, b1) of `it` into acc[0 .. it.lanes). `buf` holds kBlock elements.
  void run(const Item& it, int64_t b0, int64_t b1, Acc* acc, T* buf) const {
    int64_t bs = p_.block();
    for (int64_t b = b0; b < b1; ++b) {
      int64_t r0 = b * bs, len = std::min(bs, p_.n_red - r0);
      if (p_.direct) {
        red_.merge(acc[0], red_.block(x_ + it.base + r0, len, r0));
        continue;
      }
      if constexpr (HasColumns<R, T>) {
        if (it.lanes > 1) {
          columns(it, r0, len, acc);
          continue;
        }
      }
      gather(it, r0, len, buf);
      for (int64_t k = 0; k < it.lanes; ++k) red_.merge(acc[k], red_.block(buf + k * bs, len, r0));
    }
  }

 private:
  // Folds reduced elements [r0, r0 + len) of every lane straight from the input, row by row.
  void columns(const Item& it, int64_t r0, int64_t len, Acc* acc) const {
    Acc part[kMaxLanes];
    std::fill_n(part, it.lanes, red_.init());
    Odometer od(p_.red, r0);
    for (int64_t r = 0; r < len;) {
      int64_t n = std::min(len - r, od.run_left());
      red_.columns(x_ + it.base + od.offset(), n, od.run_stride(), it.lanes, p_.lane_stride, part);
      od.advance(n);
      r += n;
    }
    for (int64_t k = 0; k < it.lanes; ++k) red_.merge(acc[k], part[k]);
  }

  // Copies reduced elements [r0, r0 + len) of each lane k to buf + k * block().
  void gather(const Item& it, int64_t r0, int64_t len, T* buf) const {
    int64_t bs = p_.block(), ls = p_.lane_stride;
    Odometer od(p_.red, r0);
    for (int64_t r = 0; r < len;) {
      int64_t n = std::min(len - r, od.run_left()), s = od.run_stride();
      const T* src = x_ + it.base + od.offset();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < it.lanes; ++k) buf[k * bs + r + i] = src[i * s + k * ls];
      od.advance(n);
      r += n;
    }
  }

  const T* x_;
  const Plan& p_;
  const R& red_;
};

// out[o] = reduction of x over `rdims` (sorted, wrapped), for a contiguous `out` holding the
// kept dims in order.
template <typename T, typename R>
void reduce_into(const Tensor& x, const Shape& rdims, const Tensor& out, const R& red) {
  using Acc = typename R::Acc;
  Plan p = make_plan(x, rdims, R::kOrdered, HasColumns<R, T> ? kMaxLanes : kGatherLanes);
  if (p.n_out == 0) return;
  Runner<T, R> runner(x, p, red);
  auto* po = static_cast<typename R::Out*>(out.data_ptr());
  int64_t items = p.items(), blocks = runner.num_blocks();
  bool parallel = p.n_out * p.n_red >= kParallelGrain;
  int threads = omp_get_max_threads();

  if (!parallel || items >= threads) {
    // Outputs are independent: each thread takes whole items.
#pragma omp parallel if (parallel)
    {
      std::unique_ptr<T[]> buf(p.direct ? nullptr : new T[kBlock]);
      std::unique_ptr<Acc[]> acc(new Acc[p.lanes]);  // not a vector: Acc may be bool
#pragma omp for schedule(static)
      for (int64_t i = 0; i < items; ++i) {
        auto it = runner.item(i);
        std::fill_n(acc.get(), p.lanes, red.init());
        runner.run(it, 0, blocks, acc.get(), buf.get());
        for (int64_t k = 0; k < it.lanes; ++k) po[it.out0 + k] = red.finish(acc[k], p.n_red);
      }
    }
    return;
  }
  // Few outputs, long reductions: threads split each item's blocks, then partial results are
  // merged in block order.
  for (int64_t i = 0; i < items; ++i) {
    auto it = runner.item(i);
    std::unique_ptr<Acc[]> partial(new Acc[threads * p.lanes]);
    std::fill_n(partial.get(), threads * p.lanes, red.init());
#pragma omp parallel num_threads(threads)
    {
      std::unique_ptr<T[]> buf(p.direct ? nullptr : new T[kBlock]);
      int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      runner.run(it, blocks * t / nt, blocks * (t + 1) / nt, partial.get() + t * p.lanes,
                 buf.get());
    }
    for (int64_t k = 0; k < it.lanes; ++k) {
      Acc acc = partial[k];
      for (int t = 1; t < threads; ++t) red.merge(acc, partial[t * p.lanes + k]);
      po[it.out0 + k] = red.finish(acc, p.n_red);
    }
  }
}

}  // namespace coil::ops::reduce
