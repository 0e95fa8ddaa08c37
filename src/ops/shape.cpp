// Shape and indexing: cat, stack, gather, scatter, pad, repeat, flip, tril/triu.
#include "ops/pending.h"

namespace coil::ops {

COIL_PENDING(cat)
COIL_PENDING(stack)
COIL_PENDING(gather)
COIL_PENDING(index_select)
COIL_PENDING(scatter_add)
COIL_PENDING(pad)
COIL_PENDING(repeat)
COIL_PENDING(flip)
COIL_PENDING(tril)
COIL_PENDING(triu)

}  // namespace coil::ops
