// coil's eager ops, named as in PyTorch / libtorch. Each goes through the op registry: its meta
// function checks the inputs (a coil::Error names the op, shapes and dtypes) and infers the
// result, then its kernel computes. During capture the same call records a graph node.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <coil/tensor.h>

namespace coil {

// ---- factories -------------------------------------------------------------------------------
Tensor empty(const Shape& size, DType dtype = kFloat32, Device device = kCPU);
Tensor empty_strided(const Shape& size, const Shape& stride, DType dtype = kFloat32,
                     Device device = kCPU);
Tensor full(const Shape& size, const Scalar& fill_value, std::optional<DType> dtype = std::nullopt,
            Device device = kCPU);
Tensor zeros(const Shape& size, DType dtype = kFloat32, Device device = kCPU);
// full and zeros over sizes that may be symbolic (coil/symint.h).
Tensor full_symint(const SymInts& size, const Scalar& fill_value, DType dtype = kFloat32,
                   Device device = kCPU);
Tensor zeros_symint(const SymInts& size, DType dtype = kFloat32, Device device = kCPU);
// arange(end) with an end that may be symbolic: positions 0 .. end-1 of a dynamic length.
Tensor arange_symint(const SymInt& end, std::optional<DType> dtype = std::nullopt,
                     Device device = kCPU);
Tensor ones(const Shape& size, DType dtype = kFloat32, Device device = kCPU);
Tensor arange(const Scalar& end, std::optional<DType> dtype = std::nullopt, Device device = kCPU);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
              std::optional<DType> dtype = std::nullopt, Device device = kCPU);
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, DType dtype = kFloat32,
                Device device = kCPU);
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, DType dtype = kFloat32,
           Device device = kCPU);
Tensor rand(const Shape& size, DType dtype = kFloat32, Device device = kCPU);
Tensor randn(const Shape& size, DType dtype = kFloat32, Device device = kCPU);
Tensor randint(int64_t low, int64_t high, const Shape& size, DType dtype = kInt64,
               Device device = kCPU);
Tensor randint(int64_t high, const Shape& size, DType dtype = kInt64, Device device = kCPU);
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, const Scalar& fill_value);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
// Wraps memory the caller owns (no copy; the caller keeps it alive). Strides default to
// contiguous.
Tensor from_blob(void* data, const Shape& sizes, DType dtype = kFloat32);
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, DType dtype);
// Copies the values into a new tensor; `sizes` defaults to {values.size()}.
template <typename T>
Tensor tensor(const std::vector<T>& values, std::optional<Shape> sizes = std::nullopt);
Tensor scalar_tensor(const Scalar& value, std::optional<DType> dtype = std::nullopt,
                     Device device = kCPU);

// The default random generator; seeding makes rand/randn/randint/dropout repeatable.
void manual_seed(uint64_t seed);

// ---- pointwise, unary ---------------------------------------------------------------------
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");  // or "tanh"
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor logical_not(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor clone(const Tensor& x);

// ---- pointwise, binary (broadcasting; either side may be a plain number) -----------------
#define COIL_BINARY_DECL(name)                   \
  Tensor name(const Tensor& a, const Tensor& b); \
  Tensor name(const Tensor& a, const Scalar& b); \
  Tensor name(const Scalar& a, const Tensor& b);
COIL_BINARY_DECL(add)
COIL_BINARY_DECL(sub)
COIL_BINARY_DECL(mul)
COIL_BINARY_DECL(div)
COIL_BINARY_DECL(pow)
COIL_BINARY_DECL(remainder)
COIL_BINARY_DECL(maximum)
COIL_BINARY_DECL(minimum)
COIL_BINARY_DECL(atan2)
COIL_BINARY_DECL(eq)
COIL_BINARY_DECL(ne)
COIL_BINARY_DECL(lt)
COIL_BINARY_DECL(le)
COIL_BINARY_DECL(gt)
COIL_BINARY_DECL(ge)
COIL_BINARY_DECL(logical_and)
COIL_BINARY_DECL(logical_or)
COIL_BINARY_DECL(floor_divide)
#undef COIL_BINARY_DECL
// rounding_mode: std::nullopt (true division), "floor" or "trunc".
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string> rounding_mode);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& condition, const Scalar& a, const Tensor& b);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor clamp_min(const Tensor& x, const Scalar& min);
Tensor clamp_max(const Tensor& x, const Scalar& max);

Tensor operator-(const Tensor& x);
Tensor operator!(const Tensor& x);
#define COIL_OPERATOR_DECL(sym)                          \
  Tensor operator sym(const Tensor& a, const Tensor& b); \
  Tensor operator sym(const Tensor& a, const Scalar& b); \
  Tensor operator sym(const Scalar& a, const Tensor& b);
COIL_OPERATOR_DECL(+)
COIL_OPERATOR_DECL(-)
COIL_OPERATOR_DECL(*)
COIL_OPERATOR_DECL(/)
COIL_OPERATOR_DECL(%)
COIL_OPERATOR_DECL(==)
COIL_OPERATOR_DECL(!=)
COIL_OPERATOR_DECL(<)
COIL_OPERATOR_DECL(<=)
COIL_OPERATOR_DECL(>)
COIL_OPERATOR_DECL(>=)
COIL_OPERATOR_DECL(&&)
COIL_OPERATOR_DECL(||)
#undef COIL_OPERATOR_DECL

// ---- reductions (dims = {} reduces every dim) ----------------------------------------------
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& x, const Shape& dims = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims = {}, double correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor any(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor all(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

// ---- neural-network ops -------------------------------------------------------------------
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);
// In training mode the batch statistics normalise, and running_mean/var (when given) are
// updated in place with `momentum`, as torch.nn.functional.batch_norm does.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum = 0.1, double eps = 1e-5);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const Shape& stride = {1, 1}, const Shape& padding = {0, 0},
              const Shape& dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride = {},
                  const Shape& padding = {0, 0}, const Shape& dilation = {1, 1},
                  bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride = {},
                  const Shape& padding = {0, 0}, bool ceil_mode = false,
                  bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, const Shape& output_size);
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);
Tensor dropout(const Tensor& x, double p, bool train);
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const std::string& reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                const std::string& reduction = "mean", int64_t ignore_index = -100);
Tensor mse_loss(const Tensor& x, const Tensor& target, const std::string& reduction = "mean");
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

// ---- shape and indexing ---------------------------------------------------------------------
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const Shape& split_sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// pad lists (left, right) pairs from the last dim backwards, as torch.nn.functional.pad.
Tensor pad(const Tensor& x, const Shape& pad, const std::string& mode = "constant",
           double value = 0.0);
Tensor repeat(const Tensor& x, const Shape& repeats);
Tensor flip(const Tensor& x, const Shape& dims);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// ---- comparison helpers --------------------------------------------------------------------
// |a - b| <= atol + rtol * |b| elementwise (NaNs equal when equal_nan); shapes must broadcast.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
bool equal(const Tensor& a, const Tensor& b);  // same sizes and the same values

}  // namespace coil
