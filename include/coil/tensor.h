// coil::Tensor: a reference-counted handle to a strided view of a storage, named as in
// libtorch. Copying a Tensor copies the handle, not the data.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include <coil/device.h>
#include <coil/dtype.h>
#include <coil/error.h>
#include <coil/scalar.h>
#include <coil/symint.h>

namespace coil {

using Shape = std::vector<int64_t>;
class TensorImpl;

// How a 4-D [N, C, H, W] tensor lies in memory: Contiguous (NCHW, row-major) or ChannelsLast
// (NHWC: each pixel's channels side by side, the layout oneDNN's and cuDNN's fastest
// convolutions read), as torch.memory_format.
enum class MemoryFormat { Contiguous, ChannelsLast };

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // --- metadata -------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const;
  const Shape& strides() const;
  int64_t size(int64_t dim) const;  // negative dims count from the end
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  int64_t storage_offset() const;
  // Sizes that stay symbolic while a dynamic graph is captured (coil/symint.h); plain numbers
  // otherwise. Reading them never specialises the graph.
  SymInt sym_size(int64_t dim) const;
  SymInts sym_sizes() const;
  SymInt sym_numel() const;
  DType dtype() const;
  DType scalar_type() const { return dtype(); }
  Device device() const;
  bool is_contiguous() const;
  // Whether the tensor is dense in `format`'s order (ChannelsLast: 4-D [N, C, H, W] stored as
  // N, H, W, C; dims of size 1 may have any stride), as torch's is_contiguous(memory_format).
  bool is_contiguous(MemoryFormat format) const;
  // ChannelsLast for a 4-D tensor laid out so (and not also contiguous), else Contiguous.
  MemoryFormat suggest_memory_format() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  size_t element_size() const { return itemsize(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  // A tensor that only describes (a proxy during capture, a meta tensor): no storage.
  bool has_storage() const;
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  bool shares_storage(const Tensor& other) const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // --- autograd (coil/autograd.h) ------------------------------------------------------------
  bool requires_grad() const;
  const Tensor& requires_grad_(bool requires_grad = true) const;
  // The accumulated gradient of a leaf (undefined until a backward reaches it). The handle
  // shares the gradient's storage: optimizers update it in place.
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;  // an undefined tensor clears it (zero_grad)
  // A tensor no op made while recording (user-created, or requires_grad false).
  bool is_leaf() const;
  // backward() of a one-element tensor, or of any tensor with `gradient` of its sizes.
  void backward(const Tensor& gradient = {}, bool retain_graph = false,
                bool create_graph = false) const;

  // --- data -----------------------------------------------------------------------------
  // Reading data during capture is a graph break: these take the caller's source location
  // so that logs and errors can name the line.
  using Where = std::source_location;
  void* data_ptr(Where where = Where::current()) const;  // address of element [0, 0, ...]
  template <typename T>
  T* data_ptr(Where where = Where::current()) const {
    check_dtype(dtype_of<T>, "data_ptr");
    return static_cast<T*>(data_ptr(where));
  }
  Scalar item(Where where = Where::current()) const;  // a one-element tensor's value
  template <typename T>
  T item(Where where = Where::current()) const {
    return item(where).to<T>();
  }
  // The truth value of a one-element tensor (as Python's bool(tensor)).
  bool is_nonzero(Where where = Where::current()) const;
  // All elements, in logical order.
  std::vector<double> to_vector_double(Where where = Where::current()) const;
  std::string str(Where where = Where::current()) const;  // as PyTorch prints: tensor([...])

  // --- views (share storage) --------------------------------------------------------------
  Tensor view(const Shape& size) const;
  Tensor reshape(const Shape& shape) const;
  // view, reshape, expand and narrow with sizes that may be symbolic (coil/symint.h).
  Tensor view_symint(const SymInts& size) const;
  Tensor reshape_symint(const SymInts& shape) const;
  Tensor expand_symint(const SymInts& size) const;
  Tensor narrow_symint(int64_t dim, const SymInt& start, const SymInt& length) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor expand(const Shape& size) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
               int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  Tensor as_strided(const Shape& size, const Shape& stride,
                    std::optional<int64_t> storage_offset = std::nullopt) const;

  // --- copies and conversions -------------------------------------------------------------
  Tensor contiguous() const;
  // Itself when already dense in `format`, else a copy that is (ChannelsLast: 4-D tensors only).
  // Operations keep a channels-last input's layout (pointwise ops, batch norm, convolutions,
  // max pooling), so a model converted with nn::Module::to(MemoryFormat::ChannelsLast) and fed
  // channels-last images runs channels-last throughout (docs/memory_format.md).
  Tensor contiguous(MemoryFormat format) const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  // A copy on `device` (itself when already there). With `non_blocking`, as torch's
  // non_blocking=True, a copy from pinned host memory to the GPU is queued without waiting for
  // it (the source must not be written until the GPU has read it: a later synchronising call),
  // and a copy from the GPU to the host goes into new pinned memory without waiting (it must not
  // be read before a synchronising call such as coil::cuda::synchronize()).
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor cuda(int index = 0, bool non_blocking = false) const;
  Tensor cpu() const;
  // A copy in page-locked host memory, which the GPU reads directly: what makes copies to it
  // asynchronous (to(device, true)) and faster. A CPU tensor's; needs coil built with CUDA.
  Tensor pin_memory() const;
  bool is_pinned() const;
  Tensor detach() const;

  // --- math as methods ------------------------------------------------------------------
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor reciprocal() const;
  Tensor pow(const Scalar& exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor add(const Tensor& other) const;
  Tensor sub(const Tensor& other) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;

  Tensor sum(const Shape& dims = {}, bool keepdim = false) const;
  Tensor mean(const Shape& dims = {}, bool keepdim = false) const;
  Tensor prod(const Shape& dims = {}, bool keepdim = false) const;
  Tensor amax(const Shape& dims = {}, bool keepdim = false) const;
  Tensor amin(const Shape& dims = {}, bool keepdim = false) const;
  Tensor var(const Shape& dims = {}, double correction = 1, bool keepdim = false) const;
  Tensor std(const Shape& dims = {}, double correction = 1, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // --- in place (write into this tensor's storage; const like libtorch's: the handle is
  // unchanged, the data is not) ------------------------------------------------------------
  const Tensor& copy_(const Tensor& src) const;
  const Tensor& fill_(const Scalar& value) const;
  const Tensor& zero_() const { return fill_(0); }
  const Tensor& add_(const Tensor& other) const;
  const Tensor& sub_(const Tensor& other) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& div_(const Tensor& other) const;
  const Tensor& add_(const Scalar& other) const;
  const Tensor& sub_(const Scalar& other) const;
  const Tensor& mul_(const Scalar& other) const;
  const Tensor& div_(const Scalar& other) const;
  const Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  const Tensor& relu_() const;

  // Throws coil::Error naming `op` when this tensor's dtype is not `expected`.
  void check_dtype(DType expected, const char* op) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::string shape_str(const Shape& s);  // "[2, 3]"

}  // namespace coil
