// Losses: nll_loss, cross_entropy (class-index or class-probability targets, label smoothing)
// and mse_loss, with PyTorch's shape conventions and reductions. Loss terms and their sums are
// computed in double and rounded once to the result's dtype.
#include <cmath>
#include <span>

#include "ops/norm_util.h"

namespace coil::ops {

namespace {

using namespace norm_detail;

// The classification input as [n, c, s]: batch items, classes, positions per item. PyTorch's
// conventions: [C] is one item without a batch dim, [N, C] and [N, C, d1, ...] have classes
// in dim 1.
struct ClassLayout {
  int64_t n, c, s;
};

ClassLayout class_layout(const Tensor& x) {
  if (x.dim() == 1) return {1, x.size(0), 1};
  return {x.size(0), x.size(1), prod(x.sizes().begin() + 2, x.sizes().end())};
}

int64_t class_dim(const Tensor& x) { return x.dim() == 1 ? 0 : 1; }

// The input's shape without its class dim: the shape of class-index targets and of the
// unreduced loss.
Shape without_class_dim(const Tensor& x) {
  Shape s = x.sizes();
  s.erase(s.begin() + class_dim(x));
  return s;
}

void check_class_input(const Tensor& x, const char* op) {
  check_floating(x, op, "input");
  COIL_CHECK(x.dim() >= 1, op, ": expected an input of shape [C], [N, C] or [N, C, d1, ...], got ",
             describe(x));
}

void check_class_index_target(const Tensor& x, const Tensor& t, const char* op) {
  Shape expected = without_class_dim(x);
  COIL_CHECK(t.dtype() == kInt64, op, ": expected int64 class indices as target, got ", describe(t),
             "; convert it with .to(coil::kInt64)");
  COIL_CHECK(t.sizes() == expected, op, ": target ", describe(t), " does not match input ",
             describe(x), "; expected class indices of shape ", shape_str(expected),
             " (the input's shape without its class dim ", class_dim(x), ")");
}

TensorMeta loss_meta(const Tensor& x, DType dtype, Reduction r) {
  return contiguous_meta(dtype, r == Reduction::None ? without_class_dim(x) : Shape{}, x.device());
}

// Throws unless every target is a class index in [0, c) or ignore_index. Runs before the
// (possibly parallel) loss loop, which must not throw.
void check_class_indices(const int64_t* target, int64_t count, int64_t c, int64_t ignore_index,
                         const char* op) {
  for (int64_t i = 0; i < count; ++i) {
    int64_t t = target[i];
    COIL_CHECK(t == ignore_index || (t >= 0 && t < c), op, ": target ", t, " (at flat index ", i,
               ") is out of bounds for ", c, " classes; expected a class index in [0, ", c - 1,
               "] or ignore_index (", ignore_index, ")");
  }
}

// Loss terms for class-index targets, one per (item, position): (1 - eps) * -logp[target] +
// eps / C * -sum_c logp[c] (PyTorch's label smoothing; eps = 0 is plain nll), 0 where the
// target is ignore_index. Returns how many targets were not ignored.
template <typename T>
int64_t class_index_terms(const T* logp, const int64_t* target, ClassLayout L, int64_t ignore_index,
                          double eps, std::vector<double>& terms) {
  const int64_t count = L.n * L.s;
  terms.assign(static_cast<size_t>(count), 0.0);
  int64_t valid = 0;
  const bool parallel = count > 1 && count * (eps > 0 ? L.c : 1) >= kParallelGrain;
#pragma omp parallel for schedule(static) reduction(+ : valid) if (parallel)
  for (int64_t i = 0; i < count; ++i) {
    if (target[i] == ignore_index) continue;
    ++valid;
    const T* row = logp + (i / L.s) * L.c * L.s + i % L.s;  // class k at row[k * L.s]
    double term = -load(row[target[i] * L.s]);
    if (eps > 0) {
      double all = 0;
      for (int64_t k = 0; k < L.c; ++k) all -= load(row[k * L.s]);
      term = (1 - eps) * term + eps / static_cast<double>(L.c) * all;
    }
    terms[i] = term;
  }
  return valid;
}

// Loss terms for class-probability targets: -sum_c logp[c] * q[c], with q the target
// smoothed towards uniform: q = p * (1 - eps) + eps / C.
std::vector<double> class_probability_terms(const double* logp, const double* prob, ClassLayout L,
                                            double eps) {
  const int64_t count = L.n * L.s;
  std::vector<double> terms(static_cast<size_t>(count), 0.0);
  const double uniform = eps / static_cast<double>(L.c);
  const bool parallel = count > 1 && count * L.c >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < count; ++i) {
    const int64_t base = (i / L.s) * L.c * L.s + i % L.s;
    double term = 0;
    for (int64_t k = 0; k < L.c; ++k)
      term -= logp[base + k * L.s] * (prob[base + k * L.s] * (1 - eps) + uniform);
    terms[i] = term;
  }
  return terms;
}

// The loss from its terms: the terms themselves (none), their sum, or their sum / divisor.
Tensor reduce_terms(std::span<const double> terms, double divisor, Reduction r,
                    const TensorMeta& meta) {
  Tensor out = empty_from_meta(meta);
  const auto count = static_cast<int64_t>(terms.size());
  dispatch_floating(meta.dtype, [&]<typename T>() {
    T* po = out.data_ptr<T>();
    if (r == Reduction::None) {
      for (int64_t i = 0; i < count; ++i) po[i] = store<T>(terms[i]);
      return;
    }
    double sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum) if (count >= kParallelGrain)
    for (int64_t i = 0; i < count; ++i) sum += terms[i];
    // An empty mean (or one where every target is ignored) is 0 / 0 = NaN, as in PyTorch.
    po[0] = store<T>(r == Reduction::Mean ? sum / divisor : sum);
  });
  return out;
}

// True when cross_entropy's target holds class probabilities: PyTorch decides by shape.
bool probability_target(const Tensor& x, const Tensor& t) { return t.sizes() == x.sizes(); }

}  // namespace

// nll_loss(self, target, reduction, ignore_index)
std::vector<TensorMeta> meta_nll_loss(const Args& a) {
  const char* op = "nll_loss";
  const Tensor& x = a.tensor(0);
  check_class_input(x, op);
  check_class_index_target(x, a.tensor(1), op);
  common_device(a, {0, 1}, op);
  return one(loss_meta(x, x.dtype(), parse_reduction(a.str(2), op)));
}

std::vector<Tensor> eager_nll_loss(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor x = contiguous_of(a.tensor(0));
  Tensor target = contiguous_of(a.tensor(1));
  const ClassLayout L = class_layout(x);
  const int64_t ignore_index = a.i64(3);
  const int64_t* pt = target.data_ptr<int64_t>();
  check_class_indices(pt, target.numel(), L.c, ignore_index, "nll_loss");
  std::vector<double> terms;
  int64_t valid = dispatch_floating(x.dtype(), [&]<typename T>() {
    return class_index_terms(x.data_ptr<T>(), pt, L, ignore_index, 0.0, terms);
  });
  return one(reduce_terms(terms, static_cast<double>(valid), parse_reduction(a.str(2), "nll_loss"),
                          out[0]));
}

// cross_entropy(self, target, reduction, ignore_index, label_smoothing)
std::vector<TensorMeta> meta_cross_entropy(const Args& a) {
  const char* op = "cross_entropy";
  const Tensor& x = a.tensor(0);
  const Tensor& t = a.tensor(1);
  check_class_input(x, op);
  Reduction r = parse_reduction(a.str(2), op);
  const double eps = a.f64(4);
  COIL_CHECK(eps >= 0 && eps <= 1, op, ": label_smoothing must be in [0, 1], got ", eps);
  common_device(a, {0, 1}, op);
  if (!probability_target(x, t)) {
    check_class_index_target(x, t, op);
    return one(loss_meta(x, x.dtype(), r));
  }
  COIL_CHECK(is_floating(t.dtype()), op, ": a target of the input's shape ", describe(t),
             " holds class probabilities and must be floating; for class indices pass an int64 ",
             "target of shape ", shape_str(without_class_dim(x)));
  COIL_CHECK(a.i64(3) < 0, op, ": ignore_index (", a.i64(3),
             ") is not supported with class-probability targets ", describe(t));
  return one(loss_meta(x, promote_types(x.dtype(), t.dtype()), r));
}

std::vector<Tensor> eager_cross_entropy(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor& x = a.tensor(0);
  const Tensor& target_in = a.tensor(1);
  const Reduction r = parse_reduction(a.str(2), "cross_entropy");
  const int64_t ignore_index = a.i64(3);
  const double eps = a.f64(4);
  const ClassLayout L = class_layout(x);
  // log_softmax over the classes, in double whatever the input's dtype.
  Tensor logp = run_eager(OpId::log_softmax, {Arg(as_dtype(x, kFloat64)), Arg(class_dim(x))})[0];
  const double* pl = logp.data_ptr<double>();

  if (probability_target(x, target_in)) {
    Tensor prob = contiguous_of(as_dtype(target_in, kFloat64));
    std::vector<double> terms = class_probability_terms(pl, prob.data_ptr<double>(), L, eps);
    return one(reduce_terms(terms, static_cast<double>(L.n * L.s), r, out[0]));
  }
  Tensor target = contiguous_of(target_in);
  const int64_t* pt = target.data_ptr<int64_t>();
  check_class_indices(pt, target.numel(), L.c, ignore_index, "cross_entropy");
  std::vector<double> terms;
  int64_t valid = class_index_terms(pl, pt, L, ignore_index, eps, terms);
  return one(reduce_terms(terms, static_cast<double>(valid), r, out[0]));
}

// mse_loss(self, target, reduction): the operands broadcast and promote as in PyTorch.
std::vector<TensorMeta> meta_mse_loss(const Args& a) {
  const char* op = "mse_loss";
  const Tensor& x = a.tensor(0);
  const Tensor& t = a.tensor(1);
  Reduction r = parse_reduction(a.str(2), op);
  DType dtype = result_type(a, {0, 1});
  COIL_CHECK(is_floating(dtype), op, ": expected floating-point operands, got input ", describe(x),
             " and target ", describe(t), "; convert them with .to(coil::kFloat32) first");
  Shape shape = broadcast_args(a, {0, 1}, op);
  Device dev = common_device(a, {0, 1}, op);
  return one(contiguous_meta(dtype, r == Reduction::None ? shape : Shape{}, dev));
}

std::vector<Tensor> eager_mse_loss(const Args& a, const std::vector<TensorMeta>& out) {
  const DType dtype = out[0].dtype;
  Tensor x = as_dtype(a.tensor(0), dtype);
  Tensor t = as_dtype(a.tensor(1), dtype);
  // Squared differences over the broadcast shape, in double.
  Tensor sq = empty_contiguous(broadcast_shapes(x.sizes(), t.sizes(), "mse_loss"), kFloat64);
  dispatch_floating(dtype, [&]<typename T>() {
    map_binary<T, T, double>(x, t, sq, [](T u, T v) {
      double d = load(u) - load(v);
      return d * d;
    });
  });
  std::span<const double> terms(sq.data_ptr<double>(), static_cast<size_t>(sq.numel()));
  return one(reduce_terms(terms, static_cast<double>(sq.numel()),
                          parse_reduction(a.str(2), "mse_loss"), out[0]));
}

}  // namespace coil::ops
