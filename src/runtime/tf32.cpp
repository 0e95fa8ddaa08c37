// The TF32 switches of coil/cuda.h: process-wide, read by the GPU libraries' calls each time
// they choose an algorithm (so they take effect on the next product or convolution, compiled or
// eager). Built with or without CUDA: without, they are flags nothing reads.
#include <atomic>
#include <string>

#include <coil/cuda.h>
#include <coil/error.h>

namespace coil::cuda {

namespace {
// PyTorch's defaults: products in full precision, convolutions allowed TF32.
std::atomic<bool> g_matmul_tf32{false}, g_cudnn_tf32{true};
}  // namespace

void set_matmul_allow_tf32(bool on) { g_matmul_tf32 = on; }
bool matmul_allow_tf32() { return g_matmul_tf32; }
void set_cudnn_allow_tf32(bool on) { g_cudnn_tf32 = on; }
bool cudnn_allow_tf32() { return g_cudnn_tf32; }

}  // namespace coil::cuda

namespace coil {

void set_float32_matmul_precision(const std::string& precision) {
  COIL_CHECK(precision == "highest" || precision == "high" || precision == "medium",
             "set_float32_matmul_precision: \"", precision,
             "\" is not a precision; use \"highest\" (float32 products in full precision), "
             "\"high\" or \"medium\" (TF32 on the GPU)");
  cuda::set_matmul_allow_tf32(precision != "highest");
}

std::string get_float32_matmul_precision() {
  return cuda::matmul_allow_tf32() ? "high" : "highest";
}

}  // namespace coil
