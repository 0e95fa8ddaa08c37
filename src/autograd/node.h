// The autograd graph: each op call that needs gradients leaves a Node (its grad_fn) on its
// outputs; edges point from a node to the nodes of its inputs. Leaves end in AccumulateGrad.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/view_replay.h"
#include "graph/registry.h"

namespace coil::autograd {

class Node;

// Where the gradient of one input goes: input `slot` of `fn` (null: no gradient needed).
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t slot = 0;
  bool valid() const { return fn != nullptr; }
};

// A tensor kept for backward. Outputs of the node that saves them are kept without their
// grad_fn (a strong reference would be a cycle) and get it back, weakly, when unpacked.
// The storage's version at save time catches in-place writes made after it.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output_of_saver);
  Tensor unpack(const char* op) const;  // throws if an earlier backward freed it
  // Whether an in-place write changed the data since it was saved (checked by the rules that
  // read it: see GradCtx::in).
  bool modified() const;
  // Keeps only a detached alias if this is `impl`: after an in-place op made `impl` an output
  // of the node that saved it, a strong reference would be a cycle (impl -> grad_fn -> impl).
  void detach_if(const TensorImpl* impl) {
    if (data_.defined() && data_.impl() == impl) data_ = data_.detach();
  }
  void release() {
    data_ = Tensor();
    released_ = true;
  }

 private:
  Tensor data_;  // a detached alias of the saved tensor
  std::weak_ptr<Node> grad_fn_;
  uint32_t output_nr_ = 0;
  bool is_output_ = false;
  bool released_ = false;
  uint64_t version_ = 0;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  virtual ~Node() = default;
  // Gradients for each input edge, from the gradients of this node's outputs (one per output;
  // undefined where nothing flowed back).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  virtual std::string name() const = 0;
  virtual void release_saved() {}
  // `impl` now has this node as its grad_fn (an in-place op rebased it here).
  virtual void on_rebase(const TensorImpl* impl) {}

  std::vector<Edge> next_edges;          // one per differentiable input
  std::vector<TensorMeta> output_metas;  // what each output's gradient must look like
  uint64_t sequence_nr = 0;              // creation order: later nodes run first
};

// The autograd state of a tensor: its grad_fn and which output of it the tensor is, or (for
// a leaf) its accumulated gradient.
// Where a view comes from: its base (the tensor whose storage it shares; never itself a view)
// and the view ops that lead from the base to it. The base is held weakly: nodes save views,
// and a write through a view makes such nodes part of the base's history (a strong reference
// would be a cycle). `orphan_writes`, shared by every view of one base, counts the writes made
// through them after the base was gone, which no other view's history can follow.
struct ViewOrigin {
  std::weak_ptr<TensorImpl> base;
  std::vector<ViewStep> steps;
  std::shared_ptr<uint64_t> orphan_writes;
};

struct AutogradMeta : TensorExtension {
  std::shared_ptr<Node> grad_fn;
  uint32_t output_nr = 0;
  Tensor grad;
  std::weak_ptr<Node> accumulator;  // a leaf's AccumulateGrad, shared by all its uses
  // Set on views made in grad mode (PyTorch's view + in-place): a write through the view
  // rewrites its base's history, and a view whose base was written since its history was set
  // takes its history again, from the base, when next used.
  std::shared_ptr<const ViewOrigin> view;
  uint64_t view_base_version = 0;           // the base's history_version when this view's was set
  uint64_t orphan_writes_seen = 0;          // *view->orphan_writes then
  uint64_t history_version = 0;             // counts the in-place writes that rebased this tensor
  std::shared_ptr<uint64_t> orphan_writes;  // as a base: shared with its views' origins
};

AutogradMeta* autograd_meta(const Tensor& t);  // null when the tensor has none
AutogradMeta& ensure_autograd_meta(const Tensor& t);

// The edge a gradient for `t` flows into: its grad_fn, its leaf accumulator, or none.
Edge gradient_edge(const Tensor& t);
// Whether an op given `t` must record a node (grad mode on, t requires grad).
inline bool needs_grad(const Tensor& t) { return t.defined() && t.requires_grad(); }

// Makes `t` output `output_nr` of `fn`.
void set_history(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr);

uint64_t next_sequence_nr();

}  // namespace coil::autograd
