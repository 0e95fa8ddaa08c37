// embedding (row lookup) and dropout (random zeroing with the runtime's seeded generator).
#include <cstring>

#include "ops/norm_util.h"
#include "runtime/random.h"

namespace coil::ops {

using namespace norm_detail;

// embedding(weight, indices, padding_idx): out[..., :] = weight[indices[...], :].
// padding_idx only changes gradients (its row gets none), so the forward pass ignores it.
std::vector<TensorMeta> meta_embedding(const Args& a) {
  const char* op = "embedding";
  const Tensor& w = a.tensor(0);
  const Tensor& idx = a.tensor(1);
  COIL_CHECK(w.dim() == 2, op, ": weight must be 2-D [num_embeddings, embedding_dim], got ",
             describe(w));
  COIL_CHECK(idx.dtype() == kInt64 || idx.dtype() == kInt32, op,
             ": indices must be int64 or int32, got ", describe(idx),
             "; convert them with .to(coil::kInt64)");
  const int64_t pad = a.i64(2), rows = w.size(0);
  COIL_CHECK(pad == -1 || (pad >= 0 && pad < rows), op, ": padding_idx ", pad,
             " is out of range for weight ", describe(w), "; pass a row in [0, ", rows - 1,
             "], or -1 for none");
  common_device(a, {0, 1}, op);
  Shape sizes = idx.sizes();
  sizes.push_back(w.size(1));
  return one(contiguous_meta(w.dtype(), sizes, w.device()));
}

std::vector<Tensor> eager_embedding(const Args& a, const std::vector<TensorMeta>& out_meta) {
  const Tensor& w = a.tensor(0);
  Tensor idx = contiguous_of(as_dtype(a.tensor(1), kInt64));
  Tensor out = empty_from_meta(out_meta[0]);
  const int64_t count = idx.numel(), rows = w.size(0), dim = w.size(1);
  const int64_t* pi = idx.data_ptr<int64_t>();
  // Checked before the (possibly parallel) copy loop, which must not throw.
  for (int64_t i = 0; i < count; ++i)
    COIL_CHECK(pi[i] >= 0 && pi[i] < rows, "embedding: index ", pi[i], " (at flat index ", i,
               ") is out of range for weight ", describe(w), " with ", rows,
               " rows; indices must be in [0, ", rows - 1, "]");
  if (out.numel() == 0) return one(out);

  // Rows are copied as bytes: any dtype, and a weight in any layout.
  const size_t item = w.element_size();
  const char* pw = static_cast<const char*>(w.data_ptr());
  char* po = static_cast<char*>(out.data_ptr());
  const int64_t s0 = w.stride(0), s1 = w.stride(1);
  const bool parallel = count > 1 && count * dim >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < count; ++i) {
    const char* src = pw + static_cast<size_t>(pi[i] * s0) * item;
    char* dst = po + static_cast<size_t>(i * dim) * item;
    if (s1 == 1) {
      std::memcpy(dst, src, static_cast<size_t>(dim) * item);
    } else {
      for (int64_t j = 0; j < dim; ++j)
        std::memcpy(dst + j * item, src + static_cast<ptrdiff_t>(j * s1 * item), item);
    }
  }
  return one(out);
}

// dropout(input, p, train): each element is kept with probability 1 - p and scaled by
// 1 / (1 - p), so the expected value is unchanged.
std::vector<TensorMeta> meta_dropout(const Args& a) {
  const Tensor& x = a.tensor(0);
  check_floating(x, "dropout", "input");
  const double p = a.f64(1);
  COIL_CHECK(p >= 0 && p <= 1, "dropout: probability p must be in [0, 1], got ", p);
  return one(contiguous_meta(x.dtype(), x.sizes(), x.device()));
}

std::vector<Tensor> eager_dropout(const Args& a, const std::vector<TensorMeta>& out_meta) {
  const double p = a.f64(1);
  if (!a.b(2) || p == 0) return one(contiguous_copy(a.tensor(0)));
  Tensor x = contiguous_of(a.tensor(0));
  Tensor out = empty_from_meta(out_meta[0]);
  const int64_t n = x.numel();
  if (n == 0) return one(out);
  // p = 1 keeps nothing and draws nothing. As in PyTorch the result is x * 0, not a fill
  // with zeros: a NaN or inf input still gives NaN.
  Tensor draws;
  if (p < 1) {
    draws = empty_contiguous({n}, kFloat64);
    fill_uniform(draws, 0, 1);
  }
  const double keep = 1 - p, scale = p < 1 ? 1 / keep : 0;
  const double* pu = p < 1 ? draws.data_ptr<double>() : nullptr;
  dispatch_floating(x.dtype(), [&]<typename T>() {
    const T* px = x.data_ptr<T>();
    T* po = out.data_ptr<T>();
    const bool parallel = n >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t i = 0; i < n; ++i) {
      const double factor = pu && pu[i] < keep ? scale : 0.0;
      po[i] = store<T>(load(px[i]) * factor);
    }
  });
  return one(out);
}

}  // namespace coil::ops
