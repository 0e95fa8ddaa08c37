#include "backends/cuda/cudnn_calls.h"

#if __has_include(<cudnn.h>)
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include <coil/cuda.h>

#include "backends/cuda/cudnn_graph.h"
#include "backends/cuda/cudnn_library.h"
#include "runtime/copy.h"
#include "runtime/cuda_runtime.h"
#include "runtime/tensor_impl.h"

namespace coil::cuda {

namespace {

// float32: cuDNN's default math (which may use TF32 on tensor cores) while
// coil::cuda::cudnn_allow_tf32() holds, as it does by default (PyTorch's default); FMA math,
// full precision, once it is switched off. The 16-bit floats accumulate in float32 on tensor
// cores.
cudnnMathType_t math_for(DType t) {
  if (t == kFloat16 || t == kBFloat16) return CUDNN_TENSOR_OP_MATH;
  return t == kFloat32 && cudnn_allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc(const ConvWindow& w, DType t) {
    check_dnn(dnn().conv_create(&d), "cudnnCreateConvolutionDescriptor");
    const int pad[2] = {as_int(w.padding[0]), as_int(w.padding[1])};
    const int stride[2] = {as_int(w.stride[0]), as_int(w.stride[1])};
    const int dil[2] = {as_int(w.dilation[0]), as_int(w.dilation[1])};
    const cudnnDataType_t compute = t == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    check_dnn(dnn().conv_set(d, 2, pad, stride, dil, CUDNN_CROSS_CORRELATION, compute),
              "describing the convolution");
    check_dnn(dnn().conv_groups(d, as_int(w.groups)), "the group count");
    check_dnn(dnn().conv_math(d, math_for(t)), "the math type");
  }
  ~ConvDesc() { dnn().conv_destroy(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

using Pass = ConvPass;

// The algorithm cuDNN's heuristics rank first among those that keep the math type (no tensor
// cores for float32/float64) and need at most kMaxWorkspace, cached per problem.
struct Choice {
  int algo;
  size_t workspace;
};
constexpr size_t kMaxWorkspace = size_t{1} << 30;

using ProblemKey = std::tuple<Pass, int, DType, cudnnMathType_t, DnnLayout, std::array<int, 4>,
                              std::array<int, 4>, std::array<int64_t, 7>>;

ProblemKey problem_key(Pass pass, int device, DType t, DnnLayout layout,
                       const std::array<int, 4>& xdims, const std::array<int, 4>& wdims,
                       const ConvWindow& win) {
  return {pass,
          device,
          t,
          math_for(t),
          layout,
          xdims,
          wdims,
          {win.stride[0], win.stride[1], win.padding[0], win.padding[1], win.dilation[0],
           win.dilation[1], win.groups}};
}

template <typename Perf>
std::optional<Choice> first_usable(const Perf* perf, int found, DType t) {
  for (int i = 0; i < found; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspace) continue;
    if (math_for(t) == CUDNN_FMA_MATH && perf[i].mathType != CUDNN_FMA_MATH &&
        perf[i].mathType != CUDNN_DEFAULT_MATH)
      continue;
    return Choice{static_cast<int>(perf[i].algo), perf[i].memory};
  }
  return std::nullopt;
}

Choice choose(Pass pass, cudnnHandle_t h, int device, DType t, DnnLayout layout,
              const TensorDesc& x, const FilterDesc& w, const ConvDesc& conv, const TensorDesc& y,
              const std::array<int, 4>& xdims, const std::array<int, 4>& wdims,
              const ConvWindow& win) {
  static std::mutex mutex;
  static auto* cache = new std::map<ProblemKey, Choice>();
  const ProblemKey key = problem_key(pass, device, t, layout, xdims, wdims, win);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache->find(key); it != cache->end()) return it->second;
  }
  constexpr int kAsk = 16;
  int found = 0;
  std::optional<Choice> c;
  if (pass == Pass::forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kAsk];
    check_dnn(dnn().forward_algos(h, x.d, w.d, conv.d, y.d, kAsk, &found, perf),
              "choosing a forward algorithm");
    c = first_usable(perf, found, t);
  } else if (pass == Pass::data) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kAsk];
    check_dnn(dnn().data_algos(h, w.d, y.d, conv.d, x.d, kAsk, &found, perf),
              "choosing an input-gradient algorithm");
    c = first_usable(perf, found, t);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kAsk];
    check_dnn(dnn().filter_algos(h, x.d, y.d, conv.d, w.d, kAsk, &found, perf),
              "choosing a weight-gradient algorithm");
    c = first_usable(perf, found, t);
  }
  COIL_CHECK(c, "conv2d on the GPU: cuDNN has no algorithm for ", dtype_name(t), " input [",
             xdims[0], ", ", xdims[1], ", ", xdims[2], ", ", xdims[3], "] and weight [", wdims[0],
             ", ", wdims[1], ", ", wdims[2], ", ", wdims[3], "]");
  std::lock_guard<std::mutex> lock(mutex);
  return cache->emplace(key, *c).first->second;
}

// The layout a pass runs in: NHWC where one of its activations is channels-last (cuDNN's
// tensor-core kernels read and write NHWC, and given NCHW they transpose inside the call), else
// NCHW; grouped convolutions stay NCHW. Every operand is handed over in it (a copy where one is
// not), and the result is written in it (then copied where the result's own layout differs).
DnnLayout layout_for(const ConvWindow& win, std::initializer_list<const Tensor*> activations) {
  if (win.groups != 1) return DnnLayout::nchw;
  for (const Tensor* t : activations)
    if (is_nhwc(*t)) return DnnLayout::nhwc;
  return DnnLayout::nchw;
}

// Runs one pass of the convolution whose input is x (dims), weight w and output y, in `layout`,
// writing `result` (through a tensor in the layout where result is not): `run` receives the
// handle, descriptors, algorithm, workspace, alpha/beta (1, 0) and the tensor to write.
template <typename Run>
void convolve(Pass pass, DType t, DnnLayout layout, const Tensor& result,
              const std::array<int, 4>& xdims, const std::array<int, 4>& wdims,
              const std::array<int, 4>& ydims, const ConvWindow& win, const char* what, Run run) {
  const int device = result.device().index;
  cudnnHandle_t h = handle(device);
  const cudnnDataType_t type = data_type(t);
  TensorDesc x(xdims, type, layout), y(ydims, type, layout);
  FilterDesc w(wdims, type, layout);
  ConvDesc conv(win, t);
  const Choice c = choose(pass, h, device, t, layout, x, w, conv, y, xdims, wdims, win);
  void* workspace = c.workspace ? allocate(c.workspace, device) : nullptr;
  struct Release {
    void* p;
    int device;
    ~Release() {
      if (p) free(p, device);  // stream-ordered: reused only by later work on the stream
    }
  } release{workspace, device};
  const OneZero s;
  const Tensor written = in_layout(result, layout);
  set_device(device);
  run(h, x, w, conv, y, c.algo, workspace, c.workspace, s.one(t), s.zero(t), written);
  note_launch(device, what);
  if (!written.is_same(result)) copy_into(result, written);
}

// The 16-bit floats' convolutions run through cuDNN's graph API, their execution plans built
// once per problem: the legacy calls build theirs again on every call, 44 us (3x3) to 135 us
// (1x1) of the host's time each (bench/probes/conv_host_cost.cpp), more than the GPU's time
// for most of a ResNet's. The first plan of cuDNN's heuristics that builds (as PyTorch's
// cudnn.benchmark = False takes); none (nullptr, remembered): the legacy call runs.
struct ConvPlan {
  DnnGraph graph;
  TensorId x, w, y;
};

const ConvPlan* plan_for(Pass pass, int device, DType t, DnnLayout layout,
                         const std::array<int, 4>& xdims, const std::array<int, 4>& wdims,
                         const std::array<int, 4>& ydims, const ConvWindow& win) {
  static std::mutex mutex;
  static auto* plans = new std::map<ProblemKey, std::unique_ptr<ConvPlan>>();
  const ProblemKey key = problem_key(pass, device, t, layout, xdims, wdims, win);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = plans->find(key); it != plans->end()) return it->second.get();
  auto plan = std::make_unique<ConvPlan>();
  const cudnnDataType_t type = data_type(t);
  auto tensor = [&](const std::array<int, 4>& d) {
    const std::array<int64_t, 4> strides = layout_strides(d, layout);
    return plan->graph.tensor({d[0], d[1], d[2], d[3]}, {strides.begin(), strides.end()}, type);
  };
  plan->x = tensor(xdims);
  plan->w = tensor(wdims);
  plan->y = tensor(ydims);
  plan->graph.convolution(pass, plan->x, plan->w, plan->y, win);
  std::string why;
  if (!plan->graph.build(handle(device), &why)) plan.reset();
  return plans->emplace(key, std::move(plan)).first->second.get();
}

bool aligned16(const Tensor& t) { return reinterpret_cast<uintptr_t>(ptr(t)) % 16 == 0; }

// `pass` through its cached plan, where there is one and the operands are aligned for it: x, w
// and y in `layout`, but for the one the pass writes, which is written through a tensor in the
// layout (then copied where its own differs). False where the legacy call must run.
bool run_planned(Pass pass, DnnLayout layout, const Tensor& x, const Tensor& w, const Tensor& y,
                 const ConvWindow& win, const char* what) {
  const Tensor& result = pass == Pass::forward ? y : pass == Pass::data ? x : w;
  const DType t = result.dtype();
  if ((t != kBFloat16 && t != kFloat16) || win.groups != 1) return false;
  const int device = result.device().index;
  const ConvPlan* plan = plan_for(pass, device, t, layout, dims_of(x), dims_of(w), dims_of(y), win);
  if (!plan) return false;
  const Tensor written = in_layout(result, layout);
  const Tensor& px = pass == Pass::data ? written : x;
  const Tensor& pw = pass == Pass::filter ? written : w;
  const Tensor& py = pass == Pass::forward ? written : y;
  if (!aligned16(px) || !aligned16(pw) || !aligned16(py)) return false;
  const int64_t bytes = plan->graph.workspace_bytes();
  void* workspace = bytes ? allocate(static_cast<size_t>(bytes), device) : nullptr;
  set_device(device);
  plan->graph.run(handle(device),
                  {{plan->x, const_cast<void*>(ptr(px))},
                   {plan->w, const_cast<void*>(ptr(pw))},
                   {plan->y, const_cast<void*>(ptr(py))}},
                  workspace);
  if (workspace) free(workspace, device);  // stream-ordered: reused only by later work
  note_launch(device, what);
  if (!written.is_same(result)) copy_into(result, written);
  return true;
}

}  // namespace

void conv2d_forward(const Tensor& x_in, const Tensor& w_in, const Tensor& bias, const Tensor& out,
                    const ConvWindow& win) {
  if (out.numel() == 0) return;
  const DnnLayout layout = layout_for(win, {&x_in, &out});
  const Tensor x = dense(x_in, layout), w = dense(w_in, layout);
  if (!bias.defined() && run_planned(Pass::forward, layout, x, w, out, win, "cuDNN's convolution"))
    return;
  const DType t = out.dtype();
  convolve(Pass::forward, t, layout, out, dims_of(x), dims_of(w), dims_of(out), win,
           "cuDNN's convolution",
           [&](auto h, auto& xd, auto& wd, auto& conv, auto& yd, int algo, void* ws, size_t wsize,
               const void* one, const void* zero, const Tensor& y) {
             check_dnn(dnn().forward(h, one, xd.d, ptr(x), wd.d, ptr(w), conv.d,
                                     static_cast<cudnnConvolutionFwdAlgo_t>(algo), ws, wsize, zero,
                                     yd.d, mut_ptr(y)),
                       "cudnnConvolutionForward");
             if (!bias.defined()) return;
             const Tensor b = dense(bias);
             TensorDesc bd({1, as_int(b.numel()), 1, 1}, data_type(t));
             check_dnn(dnn().add_tensor(h, one, bd.d, ptr(b), one, yd.d, mut_ptr(y)),
                       "adding the bias");
           });
}

void conv2d_input_grad(const Tensor& gy_in, const Tensor& w_in, const Tensor& dx,
                       const ConvWindow& win) {
  if (dx.numel() == 0) return;
  const DnnLayout layout = layout_for(win, {&gy_in, &dx});
  const Tensor gy = dense(gy_in, layout), w = dense(w_in, layout);
  if (run_planned(Pass::data, layout, dx, w, gy, win, "cuDNN's convolution input gradient")) return;
  convolve(Pass::data, dx.dtype(), layout, dx, dims_of(dx), dims_of(w), dims_of(gy), win,
           "cuDNN's convolution input gradient",
           [&](auto h, auto& xd, auto& wd, auto& conv, auto& yd, int algo, void* ws, size_t wsize,
               const void* one, const void* zero, const Tensor& written) {
             check_dnn(dnn().backward_data(h, one, wd.d, ptr(w), yd.d, ptr(gy), conv.d,
                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), ws,
                                           wsize, zero, xd.d, mut_ptr(written)),
                       "cudnnConvolutionBackwardData");
           });
}

void conv2d_weight_grad(const Tensor& gy_in, const Tensor& x_in, const Tensor& dw,
                        const ConvWindow& win) {
  if (dw.numel() == 0) return;
  if (x_in.numel() == 0) {  // an empty batch: no contribution
    fill(dw, 0);
    return;
  }
  const DnnLayout layout = layout_for(win, {&gy_in, &x_in});
  const Tensor gy = dense(gy_in, layout), x = dense(x_in, layout);
  if (run_planned(Pass::filter, layout, x, dw, gy, win, "cuDNN's convolution weight gradient"))
    return;
  convolve(Pass::filter, dw.dtype(), layout, dw, dims_of(x), dims_of(dw), dims_of(gy), win,
           "cuDNN's convolution weight gradient",
           [&](auto h, auto& xd, auto& wd, auto& conv, auto& yd, int algo, void* ws, size_t wsize,
               const void* one, const void* zero, const Tensor& written) {
             check_dnn(dnn().backward_filter(h, one, xd.d, ptr(x), yd.d, ptr(gy), conv.d,
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), ws,
                                             wsize, zero, wd.d, mut_ptr(written)),
                       "cudnnConvolutionBackwardFilter");
           });
}

}  // namespace coil::cuda

#endif
