#include "runtime/kernels/onednn_conv.h"

#include "runtime/kernels/onednn_dtype.h"

#include <dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace coil {

namespace {

using Dims = dnnl::memory::dims;
using Tag = dnnl::memory::format_tag;
enum class Pass : int64_t { forward, backward_data, backward_weights };
using Key = std::array<int64_t, 21>;

Key key_of(const ConvShape& s, Pass pass, bool bias) {
  return {s.n,
          s.c,
          s.h,
          s.w,
          s.o,
          s.kh,
          s.kw,
          s.oh,
          s.ow,
          s.groups,
          s.stride[0],
          s.stride[1],
          s.pad[0],
          s.pad[1],
          s.dil[0],
          s.dil[1],
          bias,
          static_cast<int64_t>(pass),
          s.channels_last,
          s.weights_channels_last,
          static_cast<int64_t>(s.dtype)};
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
  bool plain;  // over the tensors' own layouts
  // oneDNN's reference implementation (its answer for layouts no fast kernel takes, such as
  // NHWC activations with an OIHW weight): a hundred times slower, never worth timing.
  bool reference = false;
};

template <typename PrimitiveDesc>
bool is_reference(const PrimitiveDesc& pd) {
  return std::string_view(pd.impl_info_str()).starts_with("ref");
}

// A geometry and pass's primitives: one over the tensors' own layouts (NCHW, oihw: no reorders)
// and one over the layouts oneDNN prefers (blocked or channels-last, reordered in and out).
// Which is faster depends on the machine and the shapes (the reorders can cost half as much as
// the convolution), so the first call times both, as cuDNN's benchmark mode does, and later
// calls run the faster.
struct Forms {
  bool made = false;            // oneDNN was asked for both (once: asking is slow)
  std::vector<Prepared> forms;  // those it has a kernel for; none: the caller's own kernel
  int chosen = -1;              // -1 until timed
};

// Creating a primitive (its kernels are generated) costs far more than running a small one:
// each geometry is made once, and entries are never removed (pointers to them stay valid).
struct Cache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
  std::map<Key, Forms> primitives;
};

Cache& cache() {
  static Cache c;
  return c;
}

std::atomic<ConvForm> forced{ConvForm::fastest};

dnnl::memory::desc any(const dnnl::memory::desc& d) {
  return dnnl::memory::desc(d.dims(), d.data_type(), Tag::any);
}

// The tensors' own layout, or any the primitive prefers.
dnnl::memory::desc layout(const dnnl::memory::desc& d, bool plain) { return plain ? d : any(d); }

// The three passes' descriptions: the tensors' plain layouts (NCHW or NHWC, (g)oihw), and the
// layouts a primitive is made over (those, or any it prefers).
struct Descs {
  dnnl::memory::desc x, w, y, bias;
  Dims stride, dil, pad_l, pad_r;
  bool plain;

  Descs(const ConvShape& s, bool with_bias, bool plain_layouts)
      : x({s.n, s.c, s.h, s.w}, onednn_data_type(s.dtype), s.channels_last ? Tag::nhwc : Tag::nchw),
        w(s.groups == 1 ? dnnl::memory::desc({s.o, s.c, s.kh, s.kw}, onednn_data_type(s.dtype),
                                             s.weights_channels_last ? Tag::ohwi : Tag::oihw)
                        : dnnl::memory::desc({s.groups, s.o / s.groups, s.c / s.groups, s.kh, s.kw},
                                             onednn_data_type(s.dtype), Tag::goihw)),
        y({s.n, s.o, s.oh, s.ow}, onednn_data_type(s.dtype),
          s.channels_last ? Tag::nhwc : Tag::nchw),
        stride{s.stride[0], s.stride[1]},
        dil{s.dil[0] - 1, s.dil[1] - 1},  // oneDNN counts dilation from 0
        pad_l{s.pad[0], s.pad[1]},
        pad_r(2),
        plain(plain_layouts) {
    if (with_bias) bias = dnnl::memory::desc({s.o}, onednn_data_type(s.dtype), Tag::x);
    // The padding after the input is explicit: what makes the output's size conv2d's.
    const int64_t in[2] = {s.h, s.w}, k[2] = {s.kh, s.kw}, out[2] = {s.oh, s.ow};
    for (int d = 0; d < 2; ++d)
      pad_r[static_cast<size_t>(d)] = (out[d] - 1) * s.stride[static_cast<size_t>(d)] +
                                      (k[d] - 1) * s.dil[static_cast<size_t>(d)] + 1 - in[d] -
                                      s.pad[static_cast<size_t>(d)];
  }

  dnnl::memory::desc at(const dnnl::memory::desc& d) const { return layout(d, plain); }

  dnnl::convolution_forward::primitive_desc forward(dnnl::prop_kind kind,
                                                    const dnnl::engine& e) const {
    dnnl::convolution_forward::desc d(kind, dnnl::algorithm::convolution_direct, at(x), at(w), bias,
                                      at(y), stride, dil, pad_l, pad_r);
    return {d, e};
  }
};

Prepared make(const ConvShape& s, Pass pass, bool bias, bool plain, const dnnl::engine& e) {
  Descs d(s, bias, plain);
  const auto algo = dnnl::algorithm::convolution_direct;
  if (pass == Pass::forward) {
    auto pd = d.forward(dnnl::prop_kind::forward_inference, e);
    Prepared p{dnnl::convolution_forward(pd),
               {{DNNL_ARG_SRC, d.x, pd.src_desc(), false},
                {DNNL_ARG_WEIGHTS, d.w, pd.weights_desc(), false},
                {DNNL_ARG_DST, d.y, pd.dst_desc(), true}},
               plain,
               is_reference(pd)};
    if (bias) p.args.push_back({DNNL_ARG_BIAS, d.bias, pd.bias_desc(), false});
    return p;
  }
  auto hint = d.forward(dnnl::prop_kind::forward_training, e);
  if (pass == Pass::backward_data) {
    dnnl::convolution_backward_data::desc bd(algo, d.at(d.x), d.at(d.w), d.at(d.y), d.stride, d.dil,
                                             d.pad_l, d.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(bd, e, hint);
    return {dnnl::convolution_backward_data(pd),
            {{DNNL_ARG_DIFF_DST, d.y, pd.diff_dst_desc(), false},
             {DNNL_ARG_WEIGHTS, d.w, pd.weights_desc(), false},
             {DNNL_ARG_DIFF_SRC, d.x, pd.diff_src_desc(), true}},
            plain,
            is_reference(pd)};
  }
  dnnl::convolution_backward_weights::desc bw(algo, d.at(d.x), d.at(d.w), d.at(d.y), d.stride,
                                              d.dil, d.pad_l, d.pad_r);
  dnnl::convolution_backward_weights::primitive_desc pd(bw, e, hint);
  return {dnnl::convolution_backward_weights(pd),
          {{DNNL_ARG_DIFF_DST, d.y, pd.diff_dst_desc(), false},
           {DNNL_ARG_SRC, d.x, pd.src_desc(), false},
           {DNNL_ARG_DIFF_WEIGHTS, d.w, pd.diff_weights_desc(), true}},
          plain,
          is_reference(pd)};
}

// Weights reordered into a primitive's layout, by (primitive, weight storage): reused while the
// storage's version and address stay. A new version replaces the entry (training rewrites the
// weights every step); the cache forgets everything past kMaxKeptWeights entries (storages
// freed long ago).
struct KeptWeight {
  uint64_t version;
  const void* data;
  dnnl::memory reordered;
};
constexpr size_t kMaxKeptWeights = 512;

dnnl::memory kept_weight(const Prepared& p, const Arg& a, dnnl::memory mine, const void* data,
                         WeightVersion wv, dnnl::stream& stream, const dnnl::engine& e) {
  static std::mutex mu;
  static std::map<std::pair<const Prepared*, uint64_t>, KeptWeight> kept;
  std::lock_guard<std::mutex> lock(mu);
  auto it = kept.find({&p, wv.storage});
  if (it != kept.end() && it->second.version == wv.version && it->second.data == data)
    return it->second.reordered;
  if (kept.size() >= kMaxKeptWeights) kept.clear();
  dnnl::memory blocked(a.wanted, e);  // a new one: a call still running may hold the old
  dnnl::reorder(mine, blocked).execute(stream, mine, blocked);
  kept[{&p, wv.storage}] = {wv.version, data, blocked};
  return blocked;
}

// Runs `p` on `data` (its arguments' memory, in Prepared::args' order).
void execute(const Prepared& p, const std::vector<const void*>& data, const dnnl::engine& e,
             WeightVersion wv) {
  dnnl::stream stream(e);
  std::unordered_map<int, dnnl::memory> args;
  std::vector<std::pair<dnnl::memory, dnnl::memory>> results;  // (the kernel's, the tensor's)
  for (size_t i = 0; i < p.args.size(); ++i) {
    const Arg& a = p.args[i];
    dnnl::memory mine(a.plain, e, const_cast<void*>(data[i]));
    if (a.wanted == a.plain) {
      args.emplace(a.id, mine);
    } else if (a.id == DNNL_ARG_WEIGHTS && wv.storage != 0) {
      args.emplace(a.id, kept_weight(p, a, mine, data[i], wv, stream, e));
    } else if (!a.output) {
      dnnl::memory blocked(a.wanted, e);
      dnnl::reorder(mine, blocked).execute(stream, mine, blocked);
      args.emplace(a.id, blocked);
    } else {
      dnnl::memory blocked(a.wanted, e);
      args.emplace(a.id, blocked);
      results.emplace_back(blocked, mine);
    }
  }
  p.prim.execute(stream, args);
  for (auto& [blocked, mine] : results) dnnl::reorder(blocked, mine).execute(stream, blocked, mine);
  stream.wait();
}

// The forms of `s` and `pass` (made on first use), the faster chosen by running each twice on
// `data` (each run writes the whole output). Returns nullptr when oneDNN has none; sets `ran`
// when the timing runs already computed the output.
const Prepared* choose(const ConvShape& s, Pass pass, bool bias,
                       const std::vector<const void*>& data, WeightVersion wv, bool& ran) {
  Cache& cc = cache();
  std::lock_guard<std::mutex> lock(cc.mu);
  Forms& f = cc.primitives[key_of(s, pass, bias)];
  if (!f.made) {
    f.made = true;
    for (bool plain : {true, false}) {
      try {
        Prepared p = make(s, pass, bias, plain, cc.engine);
        const bool same =
            !f.forms.empty() &&
            std::equal(p.args.begin(), p.args.end(), f.forms[0].args.begin(),
                       [](const Arg& a, const Arg& b) { return a.wanted == b.wanted; });
        if (!same) f.forms.push_back(std::move(p));
      } catch (const dnnl::error&) {
      }
    }
    // A 16-bit convolution with only the reference code is better run in float32 copies.
    if (s.dtype != kFloat32 ||
        std::any_of(f.forms.begin(), f.forms.end(), [](const Prepared& p) { return !p.reference; }))
      std::erase_if(f.forms, [](const Prepared& p) { return p.reference; });
    if (f.forms.size() == 1) f.chosen = 0;
  }
  if (f.forms.empty()) return nullptr;
  if (const ConvForm want = forced.load(); want != ConvForm::fastest) {
    for (const Prepared& p : f.forms)
      if (p.plain == (want == ConvForm::plain)) return &p;
    return &f.forms[0];
  }
  if (f.chosen >= 0) return &f.forms[static_cast<size_t>(f.chosen)];
  double best = 0;
  for (size_t i = 0; i < f.forms.size(); ++i) {
    double fastest = 0;
    for (int rep = 0; rep < 2; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      execute(f.forms[i], data, cc.engine, wv);
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fastest = rep == 0 ? t : std::min(fastest, t);
    }
    if (i == 0 || fastest < best) {
      best = fastest;
      f.chosen = static_cast<int>(i);
    }
  }
  // The last form timed wrote the output; when it is not the chosen one, the caller runs the
  // chosen one, so the result is the one every later call gives.
  ran = f.chosen == static_cast<int>(f.forms.size()) - 1;
  return &f.forms[static_cast<size_t>(f.chosen)];
}

// Runs the chosen primitive for `s` and `pass` on `data` (its arguments' memory, in
// Prepared::args' order); false when oneDNN has none.
bool run(const ConvShape& s, Pass pass, std::vector<const void*> data, WeightVersion wv = {}) {
  // Inside a parallel region oneDNN's kernels would split work for a team they do not have
  // (see onednn_matmul.cpp): the caller's own kernel takes it.
  if (omp_in_parallel()) return false;
  const bool bias = data.size() > 3 && data[3];
  if (!bias) data.resize(3);
  bool ran = false;
  const Prepared* p = choose(s, pass, bias, data, wv, ran);
  if (!p) return false;
  if (!ran) execute(*p, data, cache().engine, wv);
  return true;
}

}  // namespace

void set_onednn_conv_form(ConvForm form) { forced = form; }

bool onednn_conv2d(const ConvShape& s, const void* x, const void* w, const void* bias, void* y,
                   WeightVersion wv) {
  return run(s, Pass::forward, {x, w, y, bias}, wv);
}

bool onednn_conv2d_backward_data(const ConvShape& s, const void* gy, const void* w, void* dx,
                                 WeightVersion wv) {
  return run(s, Pass::backward_data, {gy, w, dx}, wv);
}

bool onednn_conv2d_backward_weights(const ConvShape& s, const void* gy, const void* x, void* dw) {
  return run(s, Pass::backward_weights, {gy, x, dw});
}

}  // namespace coil
