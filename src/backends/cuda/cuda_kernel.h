// One kernel of the schedule as a CUDA C++ __global__ function with its launch. Pointwise
// kernels take one element per thread over a flat index; reductions take one block per row
// (the kernel's outer point), its threads striding over the row in each pass and meeting in a
// block reduction; combo kernels split their blocks among their parts. The loop variables are
// replaced by expressions of the thread's indices before printing, so the index algebra
// simplifies each access (a contiguous access is the flat index itself).
#pragma once

#include "codegen/kernel_source.h"
#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil::cuda {

codegen::KernelSource generate_kernel(const schedule::Kernel& k, const ir::Program& program);

}  // namespace coil::cuda
