// One kernel of the schedule as a CUDA C++ __global__ function with its launch. Pointwise
// kernels take one element per thread over a flat index; reductions take their rows (the
// kernel's outer points) a block, a warp or a thread each, or 32 columns a block
// (row_modes.h), the threads striding over a row in each pass and meeting in a reduction;
// combo kernels split their blocks among their parts. The loop variables are
// replaced by expressions of the thread's indices before printing, so the index algebra
// simplifies each access (a contiguous access is the flat index itself).
#pragma once

#include <optional>
#include <vector>

#include "backends/cuda/row_modes.h"
#include "codegen/kernel_source.h"
#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil::cuda {

// How a kernel's threads are laid out, where a choice other than the heuristics' is asked for
// (mode="max-autotune"'s candidates): a pointwise kernel's block, or a row kernel's whole
// launch (row_modes.h). Zero / unset: the heuristics'.
struct LaunchChoice {
  int64_t pointwise_block = 0;
  std::optional<RowLaunch> rows;
};

codegen::KernelSource generate_kernel(const schedule::Kernel& k, const ir::Program& program,
                                      const LaunchChoice& choice = {});

// A row kernel as it is printed: every variance in two passes (the mean, then the squared
// deviations): block reductions of sums, no Welford state to combine across threads.
schedule::Kernel with_two_pass_variances(const schedule::Kernel& k);

// mode="max-autotune": the kernel printed with other launches than the heuristics' (other
// pointwise blocks; other groups and rows a block for rows in registers; other block widths
// for rows a block), each named `<k.name>_at<n>`, n from 1; none for kernels whose launch has
// no alternative (combo kernels, columns, rows a thread or a warp).
std::vector<codegen::KernelSource> launch_alternatives(const schedule::Kernel& k,
                                                       const ir::Program& program);

}  // namespace coil::cuda
