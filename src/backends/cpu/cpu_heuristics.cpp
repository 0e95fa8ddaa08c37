// The CPU's answers to the device-neutral layers' questions (heuristics/heuristics.h).
#include "backends/cpu/cpu_heuristics.h"

namespace coil::cpu {

namespace {

// A reduction to a few values runs on as many threads, one per value. "A few": fewer than the
// machine has threads to give them (a guess at the cores). Above this many elements per value
// it is split.
constexpr int64_t kFewValues = 16, kSplitMin = 32768;
// The column kernel shares a reduction down columns among threads by chunks of 256 values
// (backends/cpu/column_kernel.cpp): a batch norm's statistics over 64 channels of channels-last
// memory (8 x 56 x 56 rows) were one chunk, one thread. Below this many chunks, and with at
// least kColumnSplitMin elements in all (less is not worth a second parallel kernel: a small
// MLP's bias gradients), its rows are split into pieces of at least kColumnPieceMin.
constexpr int64_t kColumnChunk = 256, kColumnChunks = 32, kColumnPieceMin = 256;
constexpr int64_t kColumnSplitMin = int64_t{1} << 18;

class CpuHeuristics final : public heuristics::DeviceHeuristics {
 public:
  bool split_reduction(int64_t values, int64_t elements) const override {
    return values <= kFewValues && elements >= kSplitMin;
  }
  heuristics::ColumnSplit column_split(int64_t values, int64_t rows) const override {
    if ((values + kColumnChunk - 1) / kColumnChunk >= kColumnChunks ||
        values * rows < kColumnSplitMin)
      return {};
    return {{32, 16, 8, 4, 2}, kColumnPieceMin};
  }
  heuristics::VarianceSplit variance_split() const override {
    return heuristics::VarianceSplit::AsColumnSplit;
  }
  // The CPU's attention kernel (runtime/kernels/attention_block.h) takes any head size.
  int64_t fused_attention_max_head() const override { return heuristics::kAnyHead; }
  // Its backward's entries (runtime/kernels/attention_backward_block.h) compute in float32 or
  // float64.
  bool fused_attention_backward(DType dtype, int64_t) const override {
    return dtype == kFloat32 || dtype == kFloat64;
  }
  bool attention_keeps_stats(DType, int64_t) const override { return false; }
  // The eager kernel is vectorised along each window's row; a generated one is not measured.
  bool generated_max_pool() const override { return false; }
  // oneDNN's products take any size at the same speed per element.
  int64_t product_alignment(DType) const override { return 1; }
  const char* many_streams_cost() const override { return "more than the prefetchers follow"; }
};

}  // namespace

const heuristics::DeviceHeuristics& heuristics() {
  static const CpuHeuristics h;
  return h;
}

}  // namespace coil::cpu
