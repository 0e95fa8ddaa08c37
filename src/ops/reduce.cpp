// Reductions and scans.
#include "ops/pending.h"

namespace coil::ops {

COIL_PENDING(sum)
COIL_PENDING(mean)
COIL_PENDING(prod)
COIL_PENDING(amax)
COIL_PENDING(amin)
COIL_PENDING(argmax)
COIL_PENDING(argmin)
COIL_PENDING(var)
COIL_PENDING(std)
COIL_PENDING(logsumexp)
COIL_PENDING(any)
COIL_PENDING(all)
COIL_PENDING(cumsum)

}  // namespace coil::ops
