// Groups a lowered program's computed buffers into kernels: producers fuse into consumers
// (pointwise chains, pointwise into a reduction's loop, a reduction's result into the
// pointwise work after it), independent work over the same iteration space fuses
// horizontally, and every decision — yes or no — is recorded with its reason.
#pragma once

#include "schedule/kernel.h"

namespace coil::schedule {

Schedule schedule(const ir::Program& program);

// Horizontal fusion: consecutive pointwise kernels that do not read each other's results
// become one combo kernel (one parallel region, no barrier between its loops), as an
// optimizer's per-parameter updates do. Appends its decisions to `s.decisions`.
void fuse_horizontally(Schedule& s);

}  // namespace coil::schedule
