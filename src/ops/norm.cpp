// Normalisation, softmax, losses, embedding, dropout.
#include "ops/pending.h"

namespace coil::ops {

COIL_PENDING(softmax)
COIL_PENDING(log_softmax)
COIL_PENDING(layer_norm)
COIL_PENDING(rms_norm)
COIL_PENDING(batch_norm)
COIL_PENDING(group_norm)
COIL_PENDING(dropout)
COIL_PENDING(cross_entropy)
COIL_PENDING(nll_loss)
COIL_PENDING(mse_loss)
COIL_PENDING(embedding)

}  // namespace coil::ops
