// Strided loops for eager kernels: walk N operands of the same (broadcast) shape, each with its
// own strides (0 where broadcast), coalescing dims and running rows in parallel with OpenMP.
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "runtime/tensor_impl.h"

namespace coil {

inline constexpr int64_t kParallelGrain = 32768;  // elements below which one thread is faster

// Strides of `t` as seen from `shape` (t broadcast to it: missing/size-1 dims get stride 0).
Shape broadcast_strides(const Tensor& t, const Shape& shape);
// The broadcast of two shapes, or a coil::Error naming `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Calls row(offsets, n, steps) for each innermost row: offsets[k] is operand k's element
// offset at the row start, steps[k] its stride along the row, n the row length.
template <size_t N, typename Row>
void for_each_row(const Shape& sizes, std::array<Shape, N> strides, Row&& row) {
  // Walk the dims in the order of the first operand's (the output's) memory, outermost first:
  // a channels-last result is written along its channels, not a channel-count stride apart.
  std::vector<size_t> order;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return strides[0][a] > strides[0][b]; });
  // Coalesce: merge dims that are contiguous for every operand (size-1 dims are left out).
  Shape sz;
  std::array<Shape, N> st;
  for (size_t d : order) {
    if (sizes[d] == 0) return;
    bool merge = !sz.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = st[k].back() == strides[k][d] * sizes[d];
    if (merge) {
      sz.back() *= sizes[d];
      for (size_t k = 0; k < N; ++k) st[k].back() = strides[k][d];
    } else {
      sz.push_back(sizes[d]);
      for (size_t k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
    }
  }
  std::array<int64_t, N> steps{};
  int64_t inner = 1;
  if (!sz.empty()) {
    inner = sz.back();
    for (size_t k = 0; k < N; ++k) steps[k] = st[k].back();
  }
  int64_t ndim_outer = sz.empty() ? 0 : static_cast<int64_t>(sz.size()) - 1;
  int64_t outer = 1;
  for (int64_t d = 0; d < ndim_outer; ++d) outer *= sz[d];

  auto run = [&](int64_t o) {
    std::array<int64_t, N> off{};
    int64_t rem = o;
    for (int64_t d = ndim_outer - 1; d >= 0; --d) {
      int64_t i = rem % sz[d];
      rem /= sz[d];
      for (size_t k = 0; k < N; ++k) off[k] += i * st[k][d];
    }
    row(off, inner, steps);
  };
  if (outer > 1 && outer * inner >= kParallelGrain) {
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) run(o);
  } else if (outer == 1 && inner >= 4 * kParallelGrain) {
    // One long row: split it so every thread gets a piece.
    int64_t chunk = kParallelGrain;
    int64_t pieces = (inner + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < pieces; ++p) {
      std::array<int64_t, N> off{};
      for (size_t k = 0; k < N; ++k) off[k] = p * chunk * steps[k];
      row(off, std::min(chunk, inner - p * chunk), steps);
    }
  } else {
    for (int64_t o = 0; o < outer; ++o) run(o);
  }
}

// out[i] = f(in[i]) with out contiguous-or-strided and in broadcast to out's shape.
template <typename In, typename Out, typename F>
void map_unary(const Tensor& in, Tensor& out, F f) {
  const In* pi = static_cast<const In*>(in.data_ptr());
  Out* po = static_cast<Out*>(out.data_ptr());
  for_each_row<2>(out.sizes(), {out.strides(), broadcast_strides(in, out.sizes())},
                  [&](std::array<int64_t, 2> off, int64_t n, std::array<int64_t, 2> step) {
                    Out* o = po + off[0];
                    const In* a = pi + off[1];
                    if (step[0] == 1 && step[1] == 1) {
                      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
                    } else {
                      for (int64_t i = 0; i < n; ++i) o[i * step[0]] = f(a[i * step[1]]);
                    }
                  });
}

template <typename A, typename B, typename Out, typename F>
void map_binary(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const A* pa = static_cast<const A*>(a.data_ptr());
  const B* pb = static_cast<const B*>(b.data_ptr());
  Out* po = static_cast<Out*>(out.data_ptr());
  for_each_row<3>(
      out.sizes(),
      {out.strides(), broadcast_strides(a, out.sizes()), broadcast_strides(b, out.sizes())},
      [&](std::array<int64_t, 3> off, int64_t n, std::array<int64_t, 3> step) {
        Out* o = po + off[0];
        const A* x = pa + off[1];
        const B* y = pb + off[2];
        if (step[0] == 1 && step[1] == 1 && step[2] == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * step[0]] = f(x[i * step[1]], y[i * step[2]]);
        }
      });
}

}  // namespace coil
