// The storage and metadata behind a coil::Tensor. Internal: users see only coil::Tensor.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>

#include <coil/tensor.h>

namespace coil {

// A block of memory owned (or, for from_blob, borrowed) by one or more tensors.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  std::function<void(void*)> deleter;  // empty when the memory is borrowed
  bool pinned = false;                 // page-locked host memory (Tensor::pin_memory)
  // coil::mark_static_address: CUDA graphs read this memory where it is, never a copy of it.
  bool static_address = false;
  // Bumped by every in-place write, so autograd can tell that a tensor it saved has changed.
  uint64_t version = 0;
  // Unique for the process's life (an address may be reused): with `version`, which contents a
  // cache of something computed from them (a convolution's reordered weight) holds.
  const uint64_t id = next_id();
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (deleter) deleter(data);
  }

 private:
  static uint64_t next_id() {
    static std::atomic<uint64_t> next{1};
    return next++;
  }
};

// What a tensor looks like without its data: what meta functions compute and graph nodes
// carry (FakeTensor's role in PyTorch).
struct TensorMeta {
  DType dtype = kFloat32;
  Shape sizes;
  Shape strides;
  int64_t offset = 0;
  Device device;

  int64_t numel() const;
  bool is_contiguous() const;
  // 4-D and dense with the channels innermost ([N, C, H, W] stored as N, H, W, C; dims of size
  // 1 aside), and not also contiguous: the layout a channels-last tensor keeps.
  bool is_channels_last() const;
  bool operator==(const TensorMeta& o) const {
    return dtype == o.dtype && sizes == o.sizes && strides == o.strides && offset == o.offset &&
           device == o.device;
  }
};

// What code read of a tensor's geometry: one size or stride (of `dim`), all of them, the count.
enum class GeometryRead : uint8_t { Size, Sizes, Stride, Strides, Numel };

// Extra state other layers attach to a tensor (capture's proxy node, autograd's grad_fn).
// The runtime only holds it.
struct TensorExtension {
  virtual ~TensorExtension() = default;
  // Called when code asks for the data of `self`, which has no storage (a capture proxy):
  // either gives `self` real storage (a graph break) or throws coil::Error.
  virtual void materialize(TensorImpl& self, const char* what, const std::source_location& where) {}
  // Called when code outside any op reads a capture proxy's geometry: a number that leaves the
  // ops for the user's code, which a dynamic graph then fixes, with a guard.
  virtual void read_geometry(const TensorImpl& self, GeometryRead what, int64_t dim) {}
  // A dynamic capture's proxy: its sizes over the graph's size symbols (nullopt: plain sizes).
  virtual std::optional<std::vector<SymInt>> sym_sizes(const TensorImpl& self) {
    return std::nullopt;
  }
};

// Ops read their arguments' geometry freely (a dynamic graph's ops compute over its size
// symbols): the dispatcher holds an OpScope while an op runs on this thread.
class OpScope {
 public:
  OpScope();
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
};
// Code that an op runs as a program would (an autograd composite's parts): inside it, geometry
// reads count as the program's again.
class ProgramScope {
 public:
  ProgramScope();
  ~ProgramScope();
  ProgramScope(const ProgramScope&) = delete;
  ProgramScope& operator=(const ProgramScope&) = delete;

 private:
  int saved_;
};

class TensorImpl {
 public:
  std::shared_ptr<Storage> storage;  // null: a tensor that only describes (a proxy)
  TensorMeta meta;
  bool requires_grad = false;
  std::shared_ptr<TensorExtension> proxy;     // set while capturing
  std::shared_ptr<TensorExtension> autograd;  // set by autograd
  // Dims coil::mark_dynamic / mark_static named (bit d for dim d), read when a compiled
  // function captures with this tensor as an input.
  uint64_t marked_dynamic = 0, marked_static = 0;

  char* data() const {
    return static_cast<char*>(storage->data) + meta.offset * itemsize(meta.dtype);
  }
};

Shape contiguous_strides(const Shape& sizes);
// The strides of a 4-D [N, C, H, W] stored as N, H, W, C.
Shape channels_last_strides(const Shape& sizes);
int64_t numel_of(const Shape& sizes);
// Allocates a tensor with exactly these sizes/strides (storage large enough for them).
Tensor empty_from_meta(const TensorMeta& meta);
Tensor empty_contiguous(const Shape& sizes, DType dtype, Device device = kCPU);
// A contiguous CPU tensor in page-locked memory, which copies to and from a GPU need not wait
// for (Tensor::pin_memory, non-blocking moves).
Tensor empty_pinned(const Shape& sizes, DType dtype);
// A tensor with no storage, only metadata.
Tensor meta_tensor(const TensorMeta& meta);
// Gives a proxy its data if something can (see TensorExtension::materialize); else throws.
void ensure_storage(const Tensor& t, const char* what, const std::source_location& where);
// A view of `base`'s storage with the given geometry.
Tensor alias_with(const Tensor& base, const Shape& sizes, const Shape& strides, int64_t offset);
TensorMeta meta_of(const Tensor& t);

}  // namespace coil
