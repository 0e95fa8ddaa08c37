#include "runtime/kernels/onednn_conv.h"

#include <dnnl.hpp>
#include <omp.h>

#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace coil {

namespace {

using Dims = dnnl::memory::dims;
using Tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;
enum class Pass : int64_t { forward, backward_data, backward_weights };
using Key = std::array<int64_t, 18>;

Key key_of(const ConvShape& s, Pass pass, bool bias) {
  return {s.n,      s.c,      s.h,      s.w,      s.o,         s.kh,
          s.kw,     s.oh,     s.ow,     s.groups, s.stride[0], s.stride[1],
          s.pad[0], s.pad[1], s.dil[0], s.dil[1], bias,        static_cast<int64_t>(pass)};
}

// One argument of a primitive: the tensor's own plain layout and the one the kernel wants
// (blocked channels, usually); inputs are reordered into it, outputs out of it.
struct Arg {
  int id;  // DNNL_ARG_*
  dnnl::memory::desc plain, wanted;
  bool output;
};

// The primitive for one geometry and pass, and its arguments in the order the caller passes
// their data.
struct Prepared {
  dnnl::primitive prim;
  std::vector<Arg> args;
};

// Creating a primitive (its kernels are generated) costs far more than running a small one:
// each geometry is made once, and entries are never removed (pointers to them stay valid).
struct Cache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
  std::map<Key, std::optional<Prepared>> primitives;  // nullopt: oneDNN has no kernel
};

Cache& cache() {
  static Cache c;
  return c;
}

dnnl::memory::desc any(const dnnl::memory::desc& d) {
  return dnnl::memory::desc(d.dims(), dt::f32, Tag::any);
}

// The three passes' primitives over the tensors' plain layouts (NCHW, (g)oihw).
struct Descs {
  dnnl::memory::desc x, w, y, bias;
  Dims stride, dil, pad_l, pad_r;

  Descs(const ConvShape& s, bool with_bias)
      : x({s.n, s.c, s.h, s.w}, dt::f32, Tag::nchw),
        w(s.groups == 1 ? dnnl::memory::desc({s.o, s.c, s.kh, s.kw}, dt::f32, Tag::oihw)
                        : dnnl::memory::desc({s.groups, s.o / s.groups, s.c / s.groups, s.kh, s.kw},
                                             dt::f32, Tag::goihw)),
        y({s.n, s.o, s.oh, s.ow}, dt::f32, Tag::nchw),
        stride{s.stride[0], s.stride[1]},
        dil{s.dil[0] - 1, s.dil[1] - 1},  // oneDNN counts dilation from 0
        pad_l{s.pad[0], s.pad[1]},
        pad_r(2) {
    if (with_bias) bias = dnnl::memory::desc({s.o}, dt::f32, Tag::x);
    // The padding after the input is explicit: what makes the output's size conv2d's.
    const int64_t in[2] = {s.h, s.w}, k[2] = {s.kh, s.kw}, out[2] = {s.oh, s.ow};
    for (int d = 0; d < 2; ++d)
      pad_r[static_cast<size_t>(d)] = (out[d] - 1) * s.stride[static_cast<size_t>(d)] +
                                      (k[d] - 1) * s.dil[static_cast<size_t>(d)] + 1 - in[d] -
                                      s.pad[static_cast<size_t>(d)];
  }

  dnnl::convolution_forward::primitive_desc forward(dnnl::prop_kind kind,
                                                    const dnnl::engine& e) const {
    dnnl::convolution_forward::desc d(kind, dnnl::algorithm::convolution_direct, any(x), any(w),
                                      bias, any(y), stride, dil, pad_l, pad_r);
    return {d, e};
  }
};

Prepared make(const ConvShape& s, Pass pass, bool bias, const dnnl::engine& e) {
  Descs d(s, bias);
  const auto algo = dnnl::algorithm::convolution_direct;
  if (pass == Pass::forward) {
    auto pd = d.forward(dnnl::prop_kind::forward_inference, e);
    Prepared p{dnnl::convolution_forward(pd),
               {{DNNL_ARG_SRC, d.x, pd.src_desc(), false},
                {DNNL_ARG_WEIGHTS, d.w, pd.weights_desc(), false},
                {DNNL_ARG_DST, d.y, pd.dst_desc(), true}}};
    if (bias) p.args.push_back({DNNL_ARG_BIAS, d.bias, pd.bias_desc(), false});
    return p;
  }
  auto hint = d.forward(dnnl::prop_kind::forward_training, e);
  if (pass == Pass::backward_data) {
    dnnl::convolution_backward_data::desc bd(algo, any(d.x), any(d.w), any(d.y), d.stride, d.dil,
                                             d.pad_l, d.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(bd, e, hint);
    return {dnnl::convolution_backward_data(pd),
            {{DNNL_ARG_DIFF_DST, d.y, pd.diff_dst_desc(), false},
             {DNNL_ARG_WEIGHTS, d.w, pd.weights_desc(), false},
             {DNNL_ARG_DIFF_SRC, d.x, pd.diff_src_desc(), true}}};
  }
  dnnl::convolution_backward_weights::desc bw(algo, any(d.x), any(d.w), any(d.y), d.stride, d.dil,
                                              d.pad_l, d.pad_r);
  dnnl::convolution_backward_weights::primitive_desc pd(bw, e, hint);
  return {dnnl::convolution_backward_weights(pd),
          {{DNNL_ARG_DIFF_DST, d.y, pd.diff_dst_desc(), false},
           {DNNL_ARG_SRC, d.x, pd.src_desc(), false},
           {DNNL_ARG_DIFF_WEIGHTS, d.w, pd.diff_weights_desc(), true}}};
}

const Prepared* prepare(const ConvShape& s, Pass pass, bool bias) {
  Cache& cc = cache();
  std::lock_guard<std::mutex> lock(cc.mu);
  const Key key = key_of(s, pass, bias);
  if (auto it = cc.primitives.find(key); it != cc.primitives.end())
    return it->second ? &*it->second : nullptr;
  std::optional<Prepared>& slot = cc.primitives[key];
  try {
    slot = make(s, pass, bias, cc.engine);
  } catch (const dnnl::error&) {
    return nullptr;
  }
  return &*slot;
}

// Runs the primitive for `s` and `pass` on `data` (its arguments' memory, in Prepared::args'
// order); false when oneDNN has none.
bool run(const ConvShape& s, Pass pass, std::vector<const float*> data) {
  // Inside a parallel region oneDNN's kernels would split work for a team they do not have
  // (see onednn_matmul.cpp): the caller's own kernel takes it.
  if (omp_in_parallel()) return false;
  const bool bias = data.size() > 3 && data[3];
  if (!bias) data.resize(3);
  const Prepared* p = prepare(s, pass, bias);
  if (!p) return false;
  Cache& cc = cache();
  dnnl::stream stream(cc.engine);
  std::unordered_map<int, dnnl::memory> args;
  std::vector<std::pair<dnnl::memory, dnnl::memory>> results;  // (the kernel's, the tensor's)
  for (size_t i = 0; i < p->args.size(); ++i) {
    const Arg& a = p->args[i];
    dnnl::memory mine(a.plain, cc.engine, const_cast<float*>(data[i]));
    if (a.wanted == a.plain) {
      args.emplace(a.id, mine);
    } else if (!a.output) {
      dnnl::memory blocked(a.wanted, cc.engine);
      dnnl::reorder(mine, blocked).execute(stream, mine, blocked);
      args.emplace(a.id, blocked);
    } else {
      dnnl::memory blocked(a.wanted, cc.engine);
      args.emplace(a.id, blocked);
      results.emplace_back(blocked, mine);
    }
  }
  p->prim.execute(stream, args);
  for (auto& [blocked, mine] : results) dnnl::reorder(blocked, mine).execute(stream, blocked, mine);
  stream.wait();
  return true;
}

}  // namespace

bool onednn_conv2d(const ConvShape& s, const float* x, const float* w, const float* bias,
                   float* y) {
  return run(s, Pass::forward, {x, w, y, bias});
}

bool onednn_conv2d_backward_data(const ConvShape& s, const float* gy, const float* w, float* dx) {
  return run(s, Pass::backward_data, {gy, w, dx});
}

bool onednn_conv2d_backward_weights(const ConvShape& s, const float* gy, const float* x,
                                    float* dw) {
  return run(s, Pass::backward_weights, {gy, x, dw});
}

}  // namespace coil
