// The backward engine: from the outputs' grad_fns back to the leaves, each node run once all
// the gradients flowing into it have arrived (a count of pending edges per node, as
// PyTorch's engine keeps), gradients of a shared input summed on arrival.
#include <coil/autograd.h>
#include <coil/ops.h>

#include <atomic>
#include <map>
#include <unordered_map>

#include "autograd/node.h"
#include "graph/autocast.h"

namespace coil {

namespace {
thread_local bool tls_grad_mode = true;
}  // namespace

bool grad_mode_enabled() { return tls_grad_mode; }
void set_grad_mode(bool enabled) { tls_grad_mode = enabled; }

namespace autograd {

uint64_t next_sequence_nr() {
  static std::atomic<uint64_t> next{0};
  return next++;
}

AutogradMeta* autograd_meta(const Tensor& t) {
  return t.defined() ? static_cast<AutogradMeta*>(t.impl()->autograd.get()) : nullptr;
}

AutogradMeta& ensure_autograd_meta(const Tensor& t) {
  auto& slot = t.impl()->autograd;
  if (!slot) slot = std::make_shared<AutogradMeta>();
  return static_cast<AutogradMeta&>(*slot);
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr) {
  AutogradMeta& m = ensure_autograd_meta(t);
  m.grad_fn = fn;
  m.output_nr = output_nr;
  t.impl()->requires_grad = true;
}

namespace {

// Adds incoming gradients into a leaf's .grad().
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(const Tensor& leaf) : leaf_(leaf.impl_ptr()) {
    output_metas.push_back(meta_of(leaf));
  }
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    auto impl = leaf_.lock();
    if (!impl || !grads[0].defined()) return {};
    Tensor leaf(impl);
    AutogradMeta& m = ensure_autograd_meta(leaf);
    Tensor& g = grads[0];
    if (!m.grad.defined()) {
      // Keep the incoming tensor when nothing else can see it; else a private copy (one: a
      // gradient laid out otherwise is copied once, into the layout), so that an optimizer's
      // in-place update never writes into another tensor. Laid out as the leaf when it is
      // channels-last (torch's gradient layout contract), contiguous otherwise.
      const MemoryFormat format = leaf.impl()->meta.is_channels_last() ? MemoryFormat::ChannelsLast
                                                                       : MemoryFormat::Contiguous;
      const bool laid_out = g.is_contiguous(format);
      const bool unique = g.impl_ptr().use_count() == 1 && g.has_storage() &&
                          g.impl()->storage.use_count() == 1 && laid_out;
      m.grad = unique && !grad_mode_enabled() ? g : laid_out ? g.clone() : g.contiguous(format);
      if (m.grad.requires_grad() && !grad_mode_enabled()) m.grad = m.grad.detach();
    } else if (grad_mode_enabled()) {
      m.grad = m.grad + g;  // create_graph: the sum stays differentiable
    } else {
      m.grad.add_(g);
    }
    return {};
  }

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

}  // namespace

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  if (m && m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!t.requires_grad()) return {};
  AutogradMeta& meta = ensure_autograd_meta(t);
  std::shared_ptr<Node> acc = meta.accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    acc->sequence_nr = next_sequence_nr();
    meta.accumulator = acc;
  }
  return {acc, 0};
}

SavedTensor::SavedTensor(const Tensor& t, bool is_output_of_saver)
    : is_output_(is_output_of_saver) {
  if (!t.defined()) return;
  if (t.has_storage()) version_ = t.impl()->storage->version;
  if (!is_output_) {
    // A view's history is taken again when its base is written in place (refresh_view); the
    // saved value keeps the history it had when saved, through an alias of its own.
    const AutogradMeta* m = autograd_meta(t);
    if (m && m->view) {
      data_ = t.detach();
      if (m->grad_fn) set_history(data_, m->grad_fn, m->output_nr);
    } else {
      data_ = t;
    }
    return;
  }
  data_ = t.detach();
  if (AutogradMeta* m = autograd_meta(t)) {
    grad_fn_ = m->grad_fn;
    output_nr_ = m->output_nr;
  }
}

bool SavedTensor::modified() const {
  return data_.defined() && data_.has_storage() && data_.impl()->storage->version != version_;
}

Tensor SavedTensor::unpack(const char* op) const {
  COIL_CHECK(!released_, "backward through ", op,
             ": its saved tensors were freed by an earlier backward; pass retain_graph=true to "
             "the first backward() to run backward twice through the same graph");
  if (!data_.defined()) return Tensor();
  if (!is_output_) return data_;
  Tensor t = data_.detach();
  if (auto fn = grad_fn_.lock()) set_history(t, fn, output_nr_);
  return t;
}

namespace {

struct GradModeScope {
  explicit GradModeScope(bool on) : prev(grad_mode_enabled()) { set_grad_mode(on); }
  ~GradModeScope() { set_grad_mode(prev); }
  bool prev;
};

// One backward run: the pending-edge counts, the gradient buffers of nodes not yet run, and
// the gradients to capture (autograd::grad) instead of accumulating.
struct GraphTask {
  bool keep_graph = false;
  bool accumulate = true;  // false for autograd::grad: AccumulateGrad does not run
  std::unordered_map<Node*, int> pending;
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::map<std::pair<Node*, uint32_t>, std::vector<size_t>> captures;
  std::vector<Tensor> captured;
  // autograd::grad runs only the nodes from which a captured gradient can still be reached
  // (PyTorch's exec_info): not the history behind the inputs, nor branches that lead elsewhere.
  std::unordered_map<Node*, bool> useful;

  void add_to(std::vector<Tensor>& buffer, size_t slot, const Tensor& g) {
    if (!buffer[slot].defined()) {
      buffer[slot] = g;
    } else {
      buffer[slot] = buffer[slot] + g;
    }
  }

  std::vector<Tensor>& buffer_of(Node* n) {
    auto [it, fresh] = buffers.try_emplace(n);
    if (fresh) it->second.resize(std::max<size_t>(n->output_metas.size(), 1));
    return it->second;
  }

  void count_dependencies(const std::vector<Edge>& roots) {
    std::vector<Node*> stack;
    std::unordered_map<Node*, bool> seen;
    for (const Edge& e : roots)
      if (e.valid() && !seen[e.fn.get()]) {
        seen[e.fn.get()] = true;
        stack.push_back(e.fn.get());
      }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges) {
        if (!e.valid()) continue;
        ++pending[e.fn.get()];
        if (!seen[e.fn.get()]) {
          seen[e.fn.get()] = true;
          stack.push_back(e.fn.get());
        }
      }
    }
  }

  // Marks `useful` the nodes with an edge into a captured node or a useful node: a pass over the
  // nodes in reverse topological order (Kahn's, on a copy of the pending counts).
  void find_useful(const std::vector<Edge>& roots) {
    std::unordered_map<Node*, bool> captured_node;
    for (const auto& [key, slots] : captures) captured_node[key.first] = true;
    std::unordered_map<Node*, int> left = pending;
    std::vector<Node*> order, ready;
    std::unordered_map<Node*, bool> queued;
    for (const Edge& e : roots)
      if (e.valid() && left[e.fn.get()] == 0 && !queued[e.fn.get()]) {
        queued[e.fn.get()] = true;
        ready.push_back(e.fn.get());
      }
    while (!ready.empty()) {
      Node* n = ready.back();
      ready.pop_back();
      order.push_back(n);
      for (const Edge& e : n->next_edges)
        if (e.valid() && --left[e.fn.get()] == 0) ready.push_back(e.fn.get());
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      bool u = false;
      for (const Edge& e : (*it)->next_edges)
        u = u || (e.valid() && (captured_node.count(e.fn.get()) || useful[e.fn.get()]));
      useful[*it] = u;
    }
  }

  void run(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads,
           bool create_graph) {
    count_dependencies(roots);
    if (!accumulate) find_useful(roots);
    std::vector<std::shared_ptr<Node>> ready;
    for (size_t i = 0; i < roots.size(); ++i) {
      if (!roots[i].valid()) continue;
      add_to(buffer_of(roots[i].fn.get()), roots[i].slot, root_grads[i]);
    }
    for (const Edge& e : roots)
      if (e.valid() && pending[e.fn.get()] == 0) {
        pending[e.fn.get()] = -1;  // queued once
        ready.push_back(e.fn);
      }
    GradModeScope mode(create_graph);
    while (!ready.empty()) {
      // Later nodes first: among ready nodes any order is correct, this one frees memory early.
      auto it = std::max_element(ready.begin(), ready.end(), [](const auto& a, const auto& b) {
        return a->sequence_nr < b->sequence_nr;
      });
      std::shared_ptr<Node> node = *it;
      ready.erase(it);
      std::vector<Tensor> grads = std::move(buffer_of(node.get()));
      buffers.erase(node.get());
      for (uint32_t s = 0; s < grads.size(); ++s) {
        auto c = captures.find({node.get(), s});
        if (c != captures.end())
          for (size_t k : c->second) captured[k] = grads[s];
      }
      std::vector<Tensor> next;
      if (accumulate || useful[node.get()]) next = node->apply(std::move(grads));
      if (!keep_graph) node->release_saved();
      for (size_t i = 0; i < node->next_edges.size(); ++i) {
        const Edge& e = node->next_edges[i];
        if (!e.valid()) continue;
        if (i < next.size() && next[i].defined()) add_to(buffer_of(e.fn.get()), e.slot, next[i]);
        if (--pending[e.fn.get()] == 0) {
          pending[e.fn.get()] = -1;
          ready.push_back(e.fn);
        }
      }
    }
  }
};

// The roots of a backward: each output's edge and its starting gradient.
void prepare_roots(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                   const char* api, std::vector<Edge>& edges, std::vector<Tensor>& grads) {
  COIL_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), api, ": got ",
             outputs.size(), " outputs but ", grad_outputs.size(), " grad_outputs");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    COIL_CHECK(out.defined(), api, ": output ", i, " is an undefined tensor");
    Edge e = gradient_edge(out);
    COIL_CHECK(e.valid(), api, ": output ", i, " (sizes ", shape_str(out.sizes()),
               ") does not require grad and has no grad_fn; call requires_grad_() on the "
               "inputs you want gradients for before computing it");
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      COIL_CHECK(out.numel() == 1, api,
                 ": a gradient can only be created implicitly for an "
                 "output with one element, but output ",
                 i, " has sizes ", shape_str(out.sizes()),
                 "; pass grad_outputs (or backward(gradient))");
      g = ones_like(out);
    }
    COIL_CHECK(g.impl()->meta.sizes == out.impl()->meta.sizes, api, ": grad_outputs[", i,
               "] has sizes ", shape_str(g.sizes()), " but output ", i, " has sizes ",
               shape_str(out.sizes()));
    edges.push_back(e);
    grads.push_back(g.dtype() == out.dtype() ? g : g.to(out.dtype()));
  }
}

}  // namespace

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              bool retain_graph, bool create_graph) {
  std::vector<Edge> edges;
  std::vector<Tensor> grads;
  prepare_roots(outputs, grad_outputs, "backward", edges, grads);
  AutocastOff forward_types;  // each derivative runs in its forward op's types
  GraphTask task;
  task.keep_graph = retain_graph || create_graph;
  task.run(edges, grads, create_graph);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused) {
  std::vector<Edge> edges;
  std::vector<Tensor> grads;
  prepare_roots(outputs, grad_outputs, "autograd::grad", edges, grads);
  AutocastOff forward_types;
  GraphTask task;
  task.keep_graph = retain_graph || create_graph;
  task.accumulate = false;
  task.captured.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    COIL_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "autograd::grad: input ", i,
               " does not require grad; call requires_grad_() on it first");
    Edge e = gradient_edge(inputs[i]);
    task.captures[{e.fn.get(), e.slot}].push_back(i);
  }
  task.run(edges, grads, create_graph);
  for (size_t i = 0; i < inputs.size(); ++i) {
    COIL_CHECK(allow_unused || task.captured[i].defined(), "autograd::grad: input ", i, " (sizes ",
               shape_str(inputs[i].sizes()),
               ") was not used to compute the outputs; pass allow_unused=true if that is "
               "expected");
  }
  return task.captured;
}

void zero_grad(const std::vector<Tensor>& tensors, bool set_to_none) {
  for (const Tensor& t : tensors) {
    Tensor g = t.grad();
    if (!g.defined()) continue;
    if (set_to_none)
      t.set_grad(Tensor());
    else
      g.zero_();
  }
}

std::string grad_fn_name(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  if (m && m->grad_fn) return m->grad_fn->name();
  return "";
}

}  // namespace autograd

// ---- the Tensor methods of autograd ---------------------------------------------------------

Tensor Tensor::grad() const {
  autograd::AutogradMeta* m = autograd::autograd_meta(*this);
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  COIL_CHECK(!grad.defined() || grad.sizes() == sizes(), "set_grad: the gradient has sizes ",
             shape_str(grad.sizes()), " but the tensor has sizes ", shape_str(sizes()));
  autograd::ensure_autograd_meta(*this).grad = grad;
}

bool Tensor::is_leaf() const {
  autograd::AutogradMeta* m = autograd::autograd_meta(*this);
  return !m || !m->grad_fn;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::backward({*this},
                     gradient.defined() ? std::vector<Tensor>{gradient} : std::vector<Tensor>{},
                     retain_graph, create_graph);
}

}  // namespace coil
