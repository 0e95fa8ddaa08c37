// One kernel of the schedule as a C++ function: its loop nest (OpenMP across the outer loops
// when the work is large enough, the innermost loop vectorised when every value allows it),
// reductions with their accumulators, and the loads and stores of its buffers.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_source.h"
#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil::cpu {

codegen::KernelSource generate_kernel(const schedule::Kernel& k, const ir::Program& program);

}  // namespace coil::cpu
