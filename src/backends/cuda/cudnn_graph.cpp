#if __has_include(<cudnn.h>)
#include "backends/cuda/cudnn_graph.h"

#include <coil/error.h>

#include "backends/cuda/cudnn_library.h"

namespace coil::cuda {

BackendDescriptor::BackendDescriptor(cudnnBackendDescriptorType_t type) {
  check_dnn(dnn().backend_create(type, &d_), "creating a graph descriptor");
}

BackendDescriptor::~BackendDescriptor() {
  if (d_) dnn().backend_destroy(d_);
}

BackendDescriptor& BackendDescriptor::set(cudnnBackendAttributeName_t name,
                                          cudnnBackendAttributeType_t type, int64_t count,
                                          const void* values) {
  const cudnnStatus_t s = dnn().backend_set(d_, name, type, count, values);
  COIL_CHECK(s == CUDNN_STATUS_SUCCESS, "cuDNN's graph API: setting attribute ",
             static_cast<int>(name), " failed: ", dnn().error_string(s));
  return *this;
}

BackendDescriptor& BackendDescriptor::set(cudnnBackendAttributeName_t name,
                                          const BackendDescriptor& d) {
  cudnnBackendDescriptor_t raw = d.get();
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

cudnnStatus_t BackendDescriptor::finalize() { return dnn().backend_finalize(d_); }

namespace {

void finalize_or_throw(BackendDescriptor& d, const char* what) {
  const cudnnStatus_t s = d.finalize();
  COIL_CHECK(s == CUDNN_STATUS_SUCCESS, "cuDNN's graph API: finalizing ", what,
             " failed: ", dnn().error_string(s));
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

}  // namespace

TensorId DnnGraph::add_tensor(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                              cudnnDataType_t type, bool is_virtual, bool by_value) {
  const TensorId id = static_cast<TensorId>(tensors_.size()) + 1;
  auto t = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t alignment = 16;
  t->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id)
      .set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, static_cast<int64_t>(dims.size()),
           dims.data())
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, static_cast<int64_t>(strides.size()),
           strides.data())
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment)
      .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual)
      .set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
  finalize_or_throw(*t, "a tensor");
  tensors_.push_back(std::move(t));
  return id;
}

TensorId DnnGraph::tensor(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                          cudnnDataType_t type) {
  return add_tensor(dims, strides, type, false, false);
}

TensorId DnnGraph::inner(const std::vector<int64_t>& dims, cudnnDataType_t type,
                         const std::vector<int64_t>& strides) {
  return add_tensor(dims, strides.empty() ? contiguous_strides(dims) : strides, type, true, false);
}

TensorId DnnGraph::scalar(float value) {
  const TensorId id = add_tensor({1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);
  scalars_.emplace_back(id, value);
  return id;
}

void DnnGraph::pointwise(cudnnPointwiseMode_t mode, TensorId x, TensorId b, TensorId y,
                         cudnnDataType_t compute, TensorId t, int64_t axis) {
  auto pw = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  if (axis >= 0) pw->set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
  finalize_or_throw(*pw, "a pointwise op");
  auto op = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op->set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *pw)
      .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, desc(x))
      .set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, desc(y));
  if (b != kNoTensor) op->set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, desc(b));
  if (t != kNoTensor) op->set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, desc(t));
  finalize_or_throw(*op, "a pointwise operation");
  parts_.push_back(std::move(pw));
  ops_.push_back(std::move(op));
}

void DnnGraph::reduction(cudnnReduceTensorOp_t mode, TensorId x, TensorId y) {
  auto r = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  r->set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode)
      .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  finalize_or_throw(*r, "a reduction");
  auto op = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op->set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, *r)
      .set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, desc(x))
      .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, desc(y));
  finalize_or_throw(*op, "a reduction operation");
  parts_.push_back(std::move(r));
  ops_.push_back(std::move(op));
}

void DnnGraph::matmul(TensorId a, TensorId b, TensorId c) {
  auto m = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  m->set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  finalize_or_throw(*m, "a product");
  auto op = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op->set(CUDNN_ATTR_OPERATION_MATMUL_DESC, *m)
      .set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, desc(a))
      .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, desc(b))
      .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, desc(c));
  finalize_or_throw(*op, "a product operation");
  parts_.push_back(std::move(m));
  ops_.push_back(std::move(op));
}

void DnnGraph::reshape(TensorId x, TensorId y) {
  auto op = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  op->set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, desc(x))
      .set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, desc(y));
  finalize_or_throw(*op, "a reshape operation");
  ops_.push_back(std::move(op));
}

void DnnGraph::convolution(ConvPass pass, TensorId x, TensorId w, TensorId y,
                           const ConvWindow& window) {
  auto c = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  c->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, window.dilation.data())
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, window.stride.data())
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, window.padding.data())
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, window.padding.data());
  finalize_or_throw(*c, "a convolution");
  struct Attributes {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t alpha, beta, conv, x, w, y;
  };
  const Attributes a =
      pass == ConvPass::forward ? Attributes{CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                             CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                             CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                                             CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                             CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                                             CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                                             CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y}
      : pass == ConvPass::data
          ? Attributes{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY}
          : Attributes{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY};
  const float alpha = 1, beta = 0;
  auto op = std::make_unique<BackendDescriptor>(a.type);
  op->set(a.alpha, CUDNN_TYPE_FLOAT, 1, &alpha)
      .set(a.beta, CUDNN_TYPE_FLOAT, 1, &beta)
      .set(a.conv, *c)
      .set(a.x, desc(x))
      .set(a.w, desc(w))
      .set(a.y, desc(y));
  finalize_or_throw(*op, "a convolution operation");
  parts_.push_back(std::move(c));
  ops_.push_back(std::move(op));
}

bool DnnGraph::build(cudnnHandle_t handle, std::string* why) {
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const auto& op : ops_) ops.push_back(op->get());
  graph_ = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph_->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
           static_cast<int64_t>(ops.size()), ops.data());
  if (cudnnStatus_t s = graph_->finalize(); s != CUDNN_STATUS_SUCCESS) {
    *why = std::string("the operation graph: ") + dnn().error_string(s);
    return false;
  }
  BackendDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *graph_)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (cudnnStatus_t s = heuristics.finalize(); s != CUDNN_STATUS_SUCCESS) {
    *why = std::string("the heuristics: ") + dnn().error_string(s);
    return false;
  }
  int64_t count = 0;
  check_dnn(dnn().backend_get(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
            "counting the heuristics' engines");
  std::vector<std::unique_ptr<BackendDescriptor>> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(std::make_unique<BackendDescriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(configs.back()->get());
  }
  check_dnn(dnn().backend_get(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                              CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, raw.data()),
            "reading the heuristics' engines");
  *why = count == 0 ? "no engine takes the graph" : "";
  for (int64_t i = 0; i < count; ++i) {
    auto plan = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
        .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *configs[i]);
    if (cudnnStatus_t s = plan->finalize(); s != CUDNN_STATUS_SUCCESS) {
      *why = std::string("no engine's plan builds: ") + dnn().error_string(s);
      continue;
    }
    int64_t n = 0;
    check_dnn(dnn().backend_get(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                CUDNN_TYPE_INT64, 1, &n, &workspace_),
              "reading a plan's workspace");
    plan_ = std::move(plan);
    return true;
  }
  return false;
}

void DnnGraph::run(cudnnHandle_t handle, const std::vector<std::pair<TensorId, void*>>& pointers,
                   void* workspace) const {
  std::vector<int64_t> ids;
  std::vector<void*> data;
  for (const auto& [id, p] : pointers) ids.push_back(id), data.push_back(p);
  for (const auto& [id, value] : scalars_)
    ids.push_back(id), data.push_back(const_cast<float*>(&value));
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(ids.size()),
           ids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
           static_cast<int64_t>(data.size()), data.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  finalize_or_throw(pack, "the variant pack");
  check_dnn(dnn().backend_execute(handle, plan_->get(), pack.get()), "running a fused graph");
}

}  // namespace coil::cuda
#endif
