// Groups a lowered program's computed buffers into kernels: producers fuse into consumers
// (pointwise chains, pointwise into a reduction's loop, a reduction's result into the
// pointwise work after it), independent work over the same iteration space fuses
// horizontally, and every decision — yes or no — is recorded with its reason.
#pragma once

#include "schedule/kernel.h"

namespace coil::schedule {

Schedule schedule(const ir::Program& program);

}  // namespace coil::schedule
