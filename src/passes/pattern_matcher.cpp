#include "passes/pattern_matcher.h"

#include <algorithm>

#include "debug/log.h"
#include "passes/pass_util.h"

namespace coil {

namespace {

// A graph whose rewrites keep producing new matches (a pattern whose replacement it matches
// again) is a bug in the patterns; this bounds the sweeps that look for them.
constexpr int kMaxSweeps = 100;

bool commutes(OpId op) { return op == OpId::add || op == OpId::mul; }

bool match_expr(const PatternNode& p, Node* n, bool commutative, Match& m);

// Matches the call's arguments to the op pattern's inputs, in the order `order` gives.
bool match_inputs(const PatternNode& p, Node* n, const std::vector<size_t>& order, bool commutative,
                  Match& m) {
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    Node* arg = detail_passes::node_arg(n->args()[order[i]]);
    if (arg == nullptr || !match_expr(*p.inputs[i], arg, commutative, m)) return false;
  }
  return true;
}

bool bind(const std::string& name, Node* n, Match& m) {
  auto [it, inserted] = m.bound.emplace(name, n);
  return inserted || it->second == n;
}

bool match_expr(const PatternNode& p, Node* n, bool commutative, Match& m) {
  if (p.kind == PatternNode::Kind::Any) return bind(p.name, n, m);
  if (n->kind() != NodeKind::Call || n->op() != p.op || n->is_multi_output()) return false;
  if (n->args().size() < p.inputs.size()) return false;
  if (!p.name.empty() && !bind(p.name, n, m)) return false;
  m.matched_ops.push_back(n);
  std::vector<size_t> order(p.inputs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Match saved = m;
  if (match_inputs(p, n, order, commutative, m)) return true;
  if (!commutative || !commutes(p.op) || order.size() != 2) return false;
  m = std::move(saved);  // undo the first order's bindings before trying the other
  std::swap(order[0], order[1]);
  return match_inputs(p, n, order, commutative, m);
}

// Replaces the match's root by `fresh` and erases the matched ops nothing else uses any more.
void rewrite(Graph& g, const Match& m, Node* fresh) {
  g.replace_all_uses_with(m.root, fresh);
  // matched_ops is in pre-order, so each node comes before the inputs it may leave dead.
  std::vector<Node*> done;
  for (Node* n : m.matched_ops) {
    if (std::find(done.begin(), done.end(), n) != done.end()) continue;
    if (!n->users().empty() || detail_passes::has_side_effects(*n)) continue;
    g.erase(n);
    done.push_back(n);
  }
}

}  // namespace

PatternExpr any(std::string name) {
  COIL_ASSERT(!name.empty(), "a pattern's wildcard needs a name");
  auto p = std::make_shared<PatternNode>();
  p->kind = PatternNode::Kind::Any;
  p->name = std::move(name);
  return p;
}

PatternExpr op(OpId op, std::vector<PatternExpr> inputs, std::string name) {
  auto p = std::make_shared<PatternNode>();
  p->kind = PatternNode::Kind::Op;
  p->op = op;
  p->inputs = std::move(inputs);
  p->name = std::move(name);
  return p;
}

Node* Match::operator[](const std::string& name) const {
  auto it = bound.find(name);
  COIL_ASSERT(it != bound.end(), "pattern: no node is bound to '", name, "'");
  return it->second;
}

bool match_pattern(const Pattern& p, Node* n, Match& m) {
  COIL_ASSERT(p.expr && p.expr->kind == PatternNode::Kind::Op, "pattern '", p.name,
              "' must have an op at its root");
  m = Match{};
  m.root = n;
  if (!match_expr(*p.expr, n, p.commutative, m)) return false;
  return !p.predicate || p.predicate(m);
}

bool apply_patterns(Graph& g, const std::vector<Pattern>& patterns) {
  bool changed = false;
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    bool rewrote = false;
    // A rewrite erases only the root and nodes before it, and inserts before it: the rest of
    // the snapshot stays valid.
    for (Node* n : g.nodes()) {
      for (const Pattern& p : patterns) {
        Match m;
        if (!match_pattern(p, n, m)) continue;
        std::string old_name = n->name();
        Node* fresh = p.replacement(g, m);
        debug::log("passes", "pattern", p.name + ": " + old_name + " -> " + fresh->name());
        rewrite(g, m, fresh);
        rewrote = true;
        break;
      }
    }
    if (!rewrote) return changed;
    changed = true;
  }
  COIL_ASSERT(false, "the patterns still match after ", kMaxSweeps,
                     " sweeps: a replacement is matched again by some pattern");
  return changed;
}

}  // namespace coil
