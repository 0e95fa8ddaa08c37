// The GPU's answers to the device-neutral layers' questions (heuristics/heuristics.h). Numbers
// only, so they are here beside the interface rather than in cuda/: a build without the CUDA
// toolkit still lowers and schedules graphs for the GPU (the scheduler's golden tests do).
#include "backends/backend.h"
#include "runtime/cuda_runtime.h"

namespace coil::cuda {

namespace {

// A reduction to a few values runs on as many blocks, one per value, and a block per value
// keeps too few loads in flight below a few thousand blocks: a batch norm's statistics over 256
// channels of 32 x 56 x 56 read at a quarter of the copy bandwidth. Such a reduction of at least
// kSplitMin elements per value is split.
constexpr int64_t kFewValues = 1024, kSplitMin = 8192;
// A reduction down columns (a bias's gradient summed over the tokens) of at least this many
// rows is split, so that its blocks fill the GPU: GPT-2's 768 bias gradients over 4096 tokens
// were 768 blocks each reading one element per sector.
constexpr int64_t kColumnSplitMin = 1024;
// The split takes the fewest of 8 to 256 pieces that still give the partials' kernel this
// many column pieces (512 blocks of 32): more pieces make more blocks that each fold fewer rows
// for the same meeting in shared memory; fewer leave multiprocessors idle
// (bench/probes/column_sum.cu: [4096, 4096] was summed fastest in 8 pieces, [4096, 1024] in 16;
// a channels-last batch norm's 64 channels over 32 x 112 x 112 rows take 256).
constexpr int64_t kColumnPieces = 16384, kColumnPieceMin = 128;

class CudaHeuristics final : public heuristics::DeviceHeuristics {
 public:
  bool split_reduction(int64_t values, int64_t elements) const override {
    return values <= kFewValues && elements >= kSplitMin;
  }
  heuristics::ColumnSplit column_split(int64_t values, int64_t rows) const override {
    if (rows < kColumnSplitMin) return {};
    std::vector<int64_t> counts = {8, 16, 32, 64, 128, 256};
    while (counts.size() > 1 && counts.front() * values < kColumnPieces)
      counts.erase(counts.begin());
    return {counts, kColumnPieceMin};
  }
  heuristics::VarianceSplit variance_split() const override {
    return heuristics::VarianceSplit::AsSplitReduction;
  }
  int64_t fused_attention_max_head() const override { return kFusedAttentionMaxHead; }
  // coil's two kernels for float32 (flash_attention_backward.h); cuDNN's flash attention for the
  // 16-bit floats (cudnn_attention.h: heads of multiples of 8). Where cuDNN does not load or
  // declines the operands at run time, the op's CPU kernel runs (correct, slow).
  bool fused_attention_backward(DType dtype, int64_t head) const override {
    if (dtype == kFloat32) return head <= kAttentionBackwardMaxHead;
    return (dtype == kBFloat16 || dtype == kFloat16) && head > 0 && head % 8 == 0 &&
           head <= kFusedAttentionMaxHead;
  }
  // cuDNN's backward does; coil's float32 kernels make the rows' statistics themselves.
  bool attention_keeps_stats(DType dtype, int64_t head) const override {
    return dtype != kFloat32 && fused_attention_backward(dtype, head);
  }
  // The eager kernel pools NCHW planes, a channels-last input copied in and out of them; the
  // generated one reads and writes the input's layout and fuses with the ReLU before it.
  bool generated_max_pool() const override { return true; }
  // cuBLASLt's tensor-core kernels for the 16-bit floats read and write rows of whole 16-byte
  // pieces; a size off that runs on kernels several times slower. Float32's products ran as
  // fast unpadded (bench/probes/head_padding.cpp).
  int64_t product_alignment(DType dtype) const override {
    return dtype == kBFloat16 || dtype == kFloat16 ? 8 : 1;
  }
  const char* many_streams_cost() const override { return "each thread holding every one's loads"; }
};

}  // namespace

}  // namespace coil::cuda

namespace coil::backends {

const heuristics::DeviceHeuristics& cuda_heuristics() {
  static const cuda::CudaHeuristics h;
  return h;
}

}  // namespace coil::backends
