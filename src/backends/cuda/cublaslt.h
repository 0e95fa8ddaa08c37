// Matrix products on the GPU through cuBLASLt (loaded on first use): float32 at full precision
// (no TF32, as PyTorch's default, unless coil::cuda::set_matmul_allow_tf32 allows it), float64,
// and the 16-bit floats, with a bias and a ReLU fused into the product's epilogue where cuBLASLt
// has them. The algorithm is the heuristic's first pick, or under mode="max-autotune"
// (runtime/autotune.h) the fastest of its first candidates, timed on the first call.
#pragma once

#include <coil/tensor.h>

namespace coil::cuda {

enum class Epilogue { none, relu };

// out (contiguous, [M, N] or [batch, M, N]) = epilogue(a @ b + bias). a is [M, K] or [batch, M,
// K], b [K, N] or [batch, K, N] (a 2-dim operand of a batched product is shared by every batch),
// of any strides. bias is undefined, one value per output column (the epilogue adds it), or any
// tensor that broadcasts to out.
void matmul(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias,
            Epilogue epilogue);

// Drops the process's plans (for tests: the next product of each problem plans anew, and under
// max-autotune reads its choice from the disk cache).
void forget_matmul_plans();

}  // namespace coil::cuda
