// cumsum and scatter_add on the GPU: kernels of coil's own (coil's compiler lowers neither: a
// scan carries a value along its dim, a scatter's targets are data), made with NVRTC on first
// use and kept in the code cache like generated code. Their sources are here for the tests that
// compile them where there is no GPU.
#pragma once

#include <string>

#include <coil/tensor.h>

namespace coil::cuda {

std::string cumsum_kernel_source(DType t);                    // coil_cumsum_*
std::string scatter_add_kernel_source(DType t, DType index);  // coil_scatter_add

// out (contiguous, x's sizes and dtype) = running sums of x along `dim`, accumulated in double
// (floating dtypes) or wrapping 64-bit integers, as the CPU's kernel does.
void cumsum(const Tensor& x, int64_t dim, const Tensor& out);

// out[... index[p] ...] += src[p] along `dim`, out already holding self (atomic additions: the
// order of a float sum varies, as PyTorch's on the GPU). An index out of range is a coil::Error
// naming it, as on the CPU (the host waits for the kernel to know).
void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace coil::cuda
