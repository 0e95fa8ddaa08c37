// cuDNN's graph API (its backend descriptors) as coil's fused cuDNN graphs build on it
// (cudnn_attention.cpp): tensors named by unique ids, the operations joining them, and the
// execution plan cuDNN's heuristics give for the whole graph, run with one device pointer per
// tensor that is not virtual. cuDNN matches such a graph against its fused engines; a graph it
// has no engine for does not build, and the caller takes another path. Included only where the
// toolkit has cudnn.h.
#pragma once

#include <cudnn.h>

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cudnn_calls.h"

namespace coil::cuda {

// A convolution's three passes: the forward writes y, the data pass x's gradient from y's, the
// filter pass w's gradient.
enum class ConvPass : uint8_t { forward, data, filter };

// One backend descriptor, destroyed with it.
class BackendDescriptor {
 public:
  explicit BackendDescriptor(cudnnBackendDescriptorType_t type);
  ~BackendDescriptor();
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  BackendDescriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                         int64_t count, const void* values);
  BackendDescriptor& set(cudnnBackendAttributeName_t name, const BackendDescriptor& d);
  // cudnnBackendFinalize's status (the callers decide whether a refusal is an error).
  cudnnStatus_t finalize();

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// A tensor of a graph, by its unique id.
using TensorId = int64_t;
constexpr TensorId kNoTensor = 0;

class DnnGraph {
 public:
  // A tensor given a device pointer at each run (dims and strides as cuDNN's, outermost first).
  TensorId tensor(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                  cudnnDataType_t type);
  // A tensor inside the fused kernel, never in memory (contiguous unless given strides).
  TensorId inner(const std::vector<int64_t>& dims, cudnnDataType_t type,
                 const std::vector<int64_t>& strides = {});
  // A float32 scalar passed by value: the same number at every run.
  TensorId scalar(float value);

  // y = mode(x[, b][, t]), computed in `compute` (GEN_INDEX: the index along `axis` of x).
  void pointwise(cudnnPointwiseMode_t mode, TensorId x, TensorId b, TensorId y,
                 cudnnDataType_t compute = CUDNN_DATA_FLOAT, TensorId t = kNoTensor,
                 int64_t axis = -1);
  // y = x reduced (op) over the dims where y has size 1.
  void reduction(cudnnReduceTensorOp_t op, TensorId x, TensorId y);
  // c = a @ b over the last two dims, in float32.
  void matmul(TensorId a, TensorId b, TensorId c);
  // y = x with y's dims and strides (a transposed view of the same values).
  void reshape(TensorId x, TensorId y);
  // `pass` of the cross-correlation of x by w into y, in float32 (`window`'s groups are the
  // tensors' dims: w's second is x's channels over the groups).
  void convolution(ConvPass pass, TensorId x, TensorId w, TensorId y, const ConvWindow& window);

  // Finalizes the graph and the first plan of cuDNN's heuristics that builds for it. False,
  // with the reason in `why`, where cuDNN has no engine for the graph on this device.
  bool build(cudnnHandle_t handle, std::string* why);
  int64_t workspace_bytes() const { return workspace_; }
  // Runs the plan on the handle's stream; `pointers` gives each tensor not virtual its memory.
  void run(cudnnHandle_t handle, const std::vector<std::pair<TensorId, void*>>& pointers,
           void* workspace) const;

 private:
  const BackendDescriptor& desc(TensorId id) const { return *tensors_.at(id - 1); }
  TensorId add_tensor(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                      cudnnDataType_t type, bool is_virtual, bool by_value);

  std::vector<std::unique_ptr<BackendDescriptor>> tensors_, ops_, parts_;
  std::deque<std::pair<TensorId, float>> scalars_;  // stable addresses for the variant pack
  std::unique_ptr<BackendDescriptor> graph_, plan_;
  int64_t workspace_ = 0;
};

}  // namespace coil::cuda
