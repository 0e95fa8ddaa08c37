// Common subexpression elimination: a node that computes what an earlier node computes is
// replaced by it. Calls are compared by op and normalized arguments (so `add(x, 1)` and
// `add(x, 1)` written with a default spelled out or not are the same), numbers bit for bit
// (0.0 and -0.0 differ, NaN equals NaN), and a dim of an op's first operand counted from its
// end as the same dim counted from its front (a reduction's dims as a set). Random calls are
// never merged: two draws differ.
#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "passes/pass_util.h"
#include "passes/passes.h"

namespace coil {

namespace {

uint64_t bits(double d) { return std::bit_cast<uint64_t>(d); }

bool same_scalar(const Scalar& a, const Scalar& b) {
  if (a.kind() != b.kind()) return false;
  return a.is_floating() ? bits(a.to_double()) == bits(b.to_double()) : a.to_int() == b.to_int();
}

bool same_arg(const NodeArg& a, const NodeArg& b) {
  if (a.index() != b.index()) return false;
  if (const auto* s = std::get_if<Scalar>(&a)) return same_scalar(*s, std::get<Scalar>(b));
  if (const auto* d = std::get_if<double>(&a)) return bits(*d) == bits(std::get<double>(b));
  return a == b;
}

bool same_constant(const Tensor& a, const Tensor& b) {
  // Constants are stored contiguous, so equal values are equal bytes.
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

// Argument `i` of call `n` as it is compared: a dim of the first operand (an argument named
// "dim" of type int or int[]) counted from the front, a reduction's dims sorted. A
// decomposition and a derivative formula spell one reduction apart (layer norm's statistics
// over [-1] in the forward, over [1] in its gradient), and unmerged, both would be computed
// and saved. unsqueeze's dim counts in its result's rank, and is left as written.
NodeArg canonical_arg(const Node& n, size_t i) {
  const NodeArg& a = n.args()[i];
  if (n.kind() != NodeKind::Call || n.op() == OpId::unsqueeze) return a;
  const auto& params = op_info(n.op()).schema.args;
  if (i >= params.size() || params[i].name != "dim" || params[0].type != "Tensor" ||
      n.inputs().empty() || n.inputs()[0]->meta().size() != 1)
    return a;
  const auto rank =
      std::max<int64_t>(1, static_cast<int64_t>(n.inputs()[0]->meta()[0].sizes.size()));
  auto front = [rank](int64_t d) { return d < 0 && d >= -rank ? d + rank : d; };
  if (const auto* d = std::get_if<int64_t>(&a)) return front(*d);
  if (const auto* dims = std::get_if<Shape>(&a)) {
    Shape out;
    for (int64_t d : *dims) out.push_back(front(d));
    if (op_info(n.op()).kind == OpKind::Reduction) std::sort(out.begin(), out.end());
    return out;
  }
  return a;
}

bool same_computation(const Node& a, const Node& b) {
  if (a.kind() != b.kind()) return false;
  if (a.kind() == NodeKind::Constant) return same_constant(a.value(), b.value());
  if (a.kind() == NodeKind::Call && a.op() != b.op()) return false;
  if (a.args().size() != b.args().size()) return false;
  for (size_t i = 0; i < a.args().size(); ++i)
    if (!same_arg(canonical_arg(a, i), canonical_arg(b, i))) return false;
  return true;
}

bool mergeable(const Node& n) {
  switch (n.kind()) {
    case NodeKind::Call:
      return !detail_passes::is_random(n) && !detail_passes::has_side_effects(n);
    case NodeKind::GetItem:
      return true;
    case NodeKind::Constant:
      return n.value().has_storage();
    default:  // inputs are distinct by position; parameters by reference
      return false;
  }
}

// A cheap key that equal nodes share: the kind, the op and the input nodes (or a constant's
// shape). Nodes with equal keys are then compared in full.
size_t bucket_key(const Node& n) {
  size_t h = std::hash<int>()(static_cast<int>(n.kind()));
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  if (n.kind() == NodeKind::Call) mix(static_cast<size_t>(n.op()));
  if (n.kind() == NodeKind::Constant) {
    for (int64_t s : n.value().sizes()) mix(static_cast<size_t>(s));
  } else {
    for (const Node* in : n.inputs()) mix(std::hash<const Node*>()(in));
  }
  return h;
}

}  // namespace

bool run_cse(Graph& g) {
  std::unordered_map<size_t, std::vector<Node*>> seen;
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (!mergeable(*n)) continue;
    std::vector<Node*>& bucket = seen[bucket_key(*n)];
    Node* earlier = nullptr;
    for (Node* b : bucket) {
      if (same_computation(*b, *n)) {
        earlier = b;
        break;
      }
    }
    if (earlier == nullptr) {
      bucket.push_back(n);
      continue;
    }
    // Two results the program returned as distinct tensors stay distinct: a caller writing
    // to one must not change the other.
    if (detail_passes::reaches_output(n) && detail_passes::reaches_output(earlier)) continue;
    g.replace_all_uses_with(n, earlier);
    g.erase(n);
    changed = true;
  }
  return changed;
}

}  // namespace coil
