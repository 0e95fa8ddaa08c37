// Checks shared by the channels-last tests of the CPU (ops/test_memory_format.cpp) and the GPU
// (cuda/test_cuda_channels_last.cpp).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <coil/coil.h>

namespace coil::testing {

// A 4-D result laid out channels-last.
inline void expect_channels_last(const Tensor& t, const std::string& what) {
  EXPECT_TRUE(t.is_contiguous(MemoryFormat::ChannelsLast))
      << what << ": strides " << shape_str(t.strides());
  EXPECT_EQ(t.suggest_memory_format(), MemoryFormat::ChannelsLast) << what;
}

// The largest difference against the largest value of `want`: the two layouts sum in different
// orders (oneDNN's NHWC and NCHW kernels, cuDNN's), and training batch norm magnifies float32
// rounding in gradients near zero, which elementwise tolerances would read as errors.
inline double relative_difference(const Tensor& got, const Tensor& want) {
  return (got - want).abs().amax().item<double>() / want.abs().amax().item<double>();
}

}  // namespace coil::testing
