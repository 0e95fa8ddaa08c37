// What the device-neutral layers ask of the device a graph compiles for (Inductor's V.choices):
// decompositions, lowering and fusion read their device-dependent numbers and decisions here
// instead of testing the device, and each backend gives its own answers
// (backends/cpu/cpu_heuristics.cpp, backends/cuda_heuristics.cpp). A third device adds a
// class of its own; nothing above the backends changes.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include <coil/device.h>
#include <coil/dtype.h>

namespace coil::heuristics {

// How a reduction down columns (values side by side, each over rows a stride apart) is cut into
// pieces of rows, each reduced apart, then the pieces of each value.
struct ColumnSplit {
  std::vector<int64_t> pieces;  // the piece counts to try, in order; empty: not cut
  int64_t min_rows = 0;         // the rows a piece has at least
};

// Which rule cuts a variance (into two passes of sums, whose partials combine).
enum class VarianceSplit : uint8_t {
  AsSplitReduction,  // where split_reduction() cuts a sum of its shape
  AsColumnSplit,     // where column_split() cuts its columns
};

// Fused attention takes every head size.
constexpr int64_t kAnyHead = std::numeric_limits<int64_t>::max();

class DeviceHeuristics {
 public:
  virtual ~DeviceHeuristics() = default;

  // Whether a reduction to `values` values of `elements` elements each is split in two
  // (Inductor's split reductions): partials over pieces of each value's elements, then each
  // value's partials. Worth it where a thread or block a value would leave the device idle.
  virtual bool split_reduction(int64_t values, int64_t elements) const = 0;
  // How a reduction down columns of `values` values over `rows` rows is cut.
  virtual ColumnSplit column_split(int64_t values, int64_t rows) const = 0;
  virtual VarianceSplit variance_split() const = 0;
  // The largest head size of the device's fused attention kernel (kAnyHead: every size; 0: the
  // device has none, and attention is decomposed).
  virtual int64_t fused_attention_max_head() const = 0;
  // Whether self-attention's backward in `dtype` with heads of `head` features runs as the op
  // scaled_dot_product_attention_backward, in the device's fused kernels (else attention's
  // derivative rule takes the decomposed math).
  virtual bool fused_attention_backward(DType dtype, int64_t head) const = 0;
  // Whether that backward reads the forward's log-sum-exp of each row (then autograd records
  // attention as scaled_dot_product_attention_stats, which keeps it).
  virtual bool attention_keeps_stats(DType dtype, int64_t head) const = 0;
  // Whether max pooling's forward is lowered to a generated kernel (fused with its neighbours,
  // written in its input's layout) rather than called as the eager kernel.
  virtual bool generated_max_pool() const = 0;
  // The multiple, in elements, that a matrix product's sizes in `dtype` are padded to for the
  // device's fast kernels (1: products are not padded).
  virtual int64_t product_alignment(DType dtype) const = 0;
  // Why a kernel that walks many unrelated arrays at once runs slowly here (the reason a fusion
  // decision gives).
  virtual const char* many_streams_cost() const = 0;
};

// The heuristics of `device`'s backend (coil::Error where coil has none for it).
const DeviceHeuristics& for_device(Device device);

}  // namespace coil::heuristics
