// coil::Tensor's metadata and data access. The ops (views, math) live in src/api/, which
// routes them through the op registry; nothing here knows about graphs.
#include "runtime/tensor_impl.h"

#include "runtime/allocator.h"
#include "runtime/cuda_runtime.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "runtime/dispatch_dtype.h"

namespace coil {

int64_t numel_of(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

Shape channels_last_strides(const Shape& sizes) {
  COIL_ASSERT(sizes.size() == 4, "channels_last_strides of a ", sizes.size(), "-D shape");
  Shape strides(4);
  int64_t acc = 1;
  for (size_t d : {1, 3, 2, 0}) {
    strides[d] = acc;
    acc *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

int64_t TensorMeta::numel() const { return numel_of(sizes); }

namespace {

// 4-D and dense in N, H, W, C order (dims of size 1 may have any stride).
bool dense_channels_last(const TensorMeta& m) {
  if (m.sizes.size() != 4) return false;
  const Shape want = channels_last_strides(m.sizes);
  for (size_t d = 0; d < 4; ++d)
    if (m.sizes[d] != 1 && m.strides[d] != want[d]) return false;
  return true;
}

}  // namespace

bool TensorMeta::is_channels_last() const { return !is_contiguous() && dense_channels_last(*this); }

bool TensorMeta::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 0) return true;
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

Tensor empty_from_meta(const TensorMeta& meta) {
  if (meta.device.is_cuda()) cuda::check_device(meta.device, "empty");
  for (int64_t s : meta.sizes)
    COIL_CHECK(s >= 0, "empty: negative size in ", shape_str(meta.sizes));
  COIL_CHECK(meta.sizes.size() == meta.strides.size(), "empty_strided: sizes ",
             shape_str(meta.sizes), " and strides ", shape_str(meta.strides),
             " must have the same length");
  int64_t extent = 0;  // elements needed past the offset
  if (numel_of(meta.sizes) > 0) {
    extent = 1;
    for (size_t i = 0; i < meta.sizes.size(); ++i) {
      COIL_CHECK(meta.strides[i] >= 0, "empty_strided: negative stride in ",
                 shape_str(meta.strides));
      extent += (meta.sizes[i] - 1) * meta.strides[i];
    }
  }
  auto storage = std::make_shared<Storage>();
  storage->nbytes = static_cast<size_t>(meta.offset + extent) * itemsize(meta.dtype);
  if (meta.device.is_cuda()) {
    storage->data = cuda::allocate(storage->nbytes, meta.device.index);
    storage->deleter = [d = meta.device.index](void* p) { cuda::free(p, d); };
  } else {
    storage->data = allocate_host(storage->nbytes);
    storage->deleter = [n = storage->nbytes](void* p) { free_host(p, n); };
  }
  storage->device = meta.device;
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->meta = meta;
  return Tensor(std::move(impl));
}

Tensor empty_contiguous(const Shape& sizes, DType dtype, Device device) {
  return empty_from_meta(TensorMeta{dtype, sizes, contiguous_strides(sizes), 0, device});
}

Tensor empty_pinned(const Shape& sizes, DType dtype) {
  auto storage = std::make_shared<Storage>();
  storage->nbytes = static_cast<size_t>(numel_of(sizes)) * itemsize(dtype);
  storage->data = cuda::allocate_pinned(storage->nbytes);
  storage->deleter = [](void* p) { cuda::free_pinned(p); };
  storage->device = kCPU;
  storage->pinned = true;
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->meta = TensorMeta{dtype, sizes, contiguous_strides(sizes), 0, kCPU};
  return Tensor(std::move(impl));
}

Tensor meta_tensor(const TensorMeta& meta) {
  auto impl = std::make_shared<TensorImpl>();
  impl->meta = meta;
  return Tensor(std::move(impl));
}

Tensor alias_with(const Tensor& base, const Shape& sizes, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->meta = TensorMeta{base.dtype(), sizes, strides, offset, base.device()};
  return Tensor(std::move(impl));
}

TensorMeta meta_of(const Tensor& t) { return t.impl()->meta; }

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// ---- Tensor accessors -------------------------------------------------------------------------

namespace {
const TensorImpl& impl_of(const Tensor& t) {
  COIL_CHECK(t.defined(), "this tensor is undefined (default-constructed); assign a tensor first");
  return *t.impl();
}
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);
  COIL_CHECK(dim >= -n && dim < n, op, ": dimension ", dim, " is out of range for a tensor with ",
             ndim, " dims (expected ", -n, " to ", n - 1, ")");
  return dim < 0 ? dim + n : dim;
}
}  // namespace

namespace {
thread_local int tls_op_depth = 0;

// A proxy's geometry read outside the ops (see TensorExtension::read_geometry).
const TensorImpl& read(const Tensor& t, GeometryRead what, int64_t dim = -1) {
  const TensorImpl& impl = impl_of(t);
  if (impl.proxy && tls_op_depth == 0) impl.proxy->read_geometry(impl, what, dim);
  return impl;
}
}  // namespace

OpScope::OpScope() { ++tls_op_depth; }
OpScope::~OpScope() { --tls_op_depth; }
ProgramScope::ProgramScope() : saved_(tls_op_depth) { tls_op_depth = 0; }
ProgramScope::~ProgramScope() { tls_op_depth = saved_; }

const Shape& Tensor::sizes() const { return read(*this, GeometryRead::Sizes).meta.sizes; }
const Shape& Tensor::strides() const { return read(*this, GeometryRead::Strides).meta.strides; }
int64_t Tensor::dim() const { return static_cast<int64_t>(impl_of(*this).meta.sizes.size()); }
int64_t Tensor::size(int64_t d) const {
  if (dim() == 0) wrap_dim(d, 0, "size");
  if (dim() == 0) return 1;
  d = wrap_dim(d, dim(), "size");
  return read(*this, GeometryRead::Size, d).meta.sizes[static_cast<size_t>(d)];
}
int64_t Tensor::stride(int64_t d) const {
  if (dim() == 0) return 1;
  d = wrap_dim(d, dim(), "stride");
  return read(*this, GeometryRead::Stride, d).meta.strides[static_cast<size_t>(d)];
}
int64_t Tensor::numel() const { return read(*this, GeometryRead::Numel).meta.numel(); }
SymInts Tensor::sym_sizes() const {
  const TensorImpl& impl = impl_of(*this);
  if (impl.proxy)
    if (std::optional<SymInts> s = impl.proxy->sym_sizes(impl)) return *s;
  return SymInts(impl.meta.sizes.begin(), impl.meta.sizes.end());
}
SymInt Tensor::sym_size(int64_t d) const {
  if (dim() == 0) wrap_dim(d, 0, "sym_size");
  if (dim() == 0) return 1;
  return sym_sizes()[static_cast<size_t>(wrap_dim(d, dim(), "sym_size"))];
}

int64_t Tensor::storage_offset() const { return impl_of(*this).meta.offset; }
DType Tensor::dtype() const { return impl_of(*this).meta.dtype; }
Device Tensor::device() const { return impl_of(*this).meta.device; }
bool Tensor::is_contiguous() const { return impl_of(*this).meta.is_contiguous(); }
bool Tensor::is_contiguous(MemoryFormat format) const {
  const TensorMeta& m = read(*this, GeometryRead::Strides).meta;
  return format == MemoryFormat::ChannelsLast ? dense_channels_last(m) : m.is_contiguous();
}
MemoryFormat Tensor::suggest_memory_format() const {
  return read(*this, GeometryRead::Strides).meta.is_channels_last() ? MemoryFormat::ChannelsLast
                                                                    : MemoryFormat::Contiguous;
}
bool Tensor::has_storage() const { return impl_of(*this).storage != nullptr; }
bool Tensor::is_pinned() const {
  const TensorImpl& impl = impl_of(*this);
  return impl.storage && impl.storage->pinned;
}

Tensor Tensor::pin_memory() const {
  COIL_CHECK(device().is_cpu(), "pin_memory: only CPU tensors can be pinned, this one is on ",
             device().str());
  if (is_pinned()) return *this;
  Tensor src = contiguous();
  Tensor out = empty_pinned(sizes(), dtype());
  if (out.impl()->storage->nbytes)
    std::memcpy(out.impl()->data(), src.impl()->data(), out.impl()->storage->nbytes);
  return out;
}
bool Tensor::shares_storage(const Tensor& other) const {
  return defined() && other.defined() && impl_->storage && impl_->storage == other.impl_->storage;
}
bool Tensor::requires_grad() const { return impl_of(*this).requires_grad; }
const Tensor& Tensor::requires_grad_(bool requires_grad) const {
  COIL_CHECK(!requires_grad || is_floating(dtype()), "requires_grad_: only floating-point tensors ",
             "can require gradients, but this tensor is ", dtype_name(dtype()));
  impl_->requires_grad = requires_grad;
  return *this;
}

void Tensor::check_dtype(DType expected, const char* op) const {
  COIL_CHECK(dtype() == expected, op, ": the tensor is ", dtype_name(dtype()), " but ",
             dtype_name(expected), " was requested; convert it with .to(coil::k...) first");
}

void ensure_storage(const Tensor& t, const char* what, const std::source_location& where) {
  TensorImpl& impl = *t.impl();
  if (impl.storage) return;
  if (impl.proxy) impl.proxy->materialize(impl, what, where);
  COIL_CHECK(impl.storage != nullptr, what, ": this tensor ", dtype_short_name(impl.meta.dtype),
             shape_str(impl.meta.sizes), " has no data (it only describes a tensor)");
}

void* Tensor::data_ptr(Where where) const {
  const TensorImpl& impl = impl_of(*this);
  ensure_storage(*this, "data_ptr", where);
  return impl.data();
}

bool Tensor::is_nonzero(Where where) const {
  COIL_CHECK(numel() == 1, "is_nonzero: the truth value of a tensor with ", numel(),
             " elements is ambiguous; reduce it first (any(), all())");
  return item(where).to_bool();
}

Scalar Tensor::item(Where where) const {
  COIL_CHECK(numel() == 1, "item: a tensor with ", numel(), " elements (sizes ", shape_str(sizes()),
             ") cannot be converted to a number; only one-element tensors can");
  ensure_storage(*this, "item()", where);
  if (device().is_cuda()) return to(kCPU).item(where);  // waits for the GPU
  const char* p = static_cast<const char*>(data_ptr(where));
  return dispatch_dtype(dtype(),
                        [&]<typename T>() { return Scalar(*reinterpret_cast<const T*>(p)); });
}

std::vector<double> Tensor::to_vector_double(Where where) const {
  ensure_storage(*this, "reading values", where);
  if (device().is_cuda()) return to(kCPU).to_vector_double(where);
  std::vector<double> out;
  out.reserve(static_cast<size_t>(numel()));
  const char* base = static_cast<const char*>(data_ptr(where));
  dispatch_dtype(dtype(), [&]<typename T>() {
    const T* p = reinterpret_cast<const T*>(base);
    Shape idx(sizes().size(), 0);
    for (int64_t n = 0; n < numel(); ++n) {
      int64_t off = 0;
      for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides()[d];
      out.push_back(static_cast<double>(static_cast<acc_type<T>>(p[off])));
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < sizes()[d]) break;
        idx[d] = 0;
      }
    }
  });
  return out;
}

}  // namespace coil
