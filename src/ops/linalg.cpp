// Matrix products, convolution, pooling, attention.
#include "ops/pending.h"

namespace coil::ops {

COIL_PENDING(linear)
COIL_PENDING(matmul)
COIL_PENDING(mm)
COIL_PENDING(bmm)
COIL_PENDING(addmm)
COIL_PENDING(conv2d)
COIL_PENDING(max_pool2d)
COIL_PENDING(avg_pool2d)
COIL_PENDING(adaptive_avg_pool2d)
COIL_PENDING(scaled_dot_product_attention)

}  // namespace coil::ops
