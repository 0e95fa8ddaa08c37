// One kernel of the schedule as a CUDA C++ __global__ function with its launch. Pointwise
// kernels take one element per thread over a flat index; reductions take their rows (the
// kernel's outer points) a block, a warp or a thread each, or 32 columns a block
// (row_modes.h), the threads striding over a row in each pass and meeting in a reduction;
// combo kernels split their blocks among their parts. The loop variables are
// replaced by expressions of the thread's indices before printing, so the index algebra
// simplifies each access (a contiguous access is the flat index itself).
#pragma once

#include "codegen/kernel_source.h"
#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil::cuda {

codegen::KernelSource generate_kernel(const schedule::Kernel& k, const ir::Program& program);

}  // namespace coil::cuda
