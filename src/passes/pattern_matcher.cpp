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

// The rest of a match, once a subpattern has matched: matching is depth-first with
// backtracking, so a choice made early (which operand of a commutative op comes first) is
// undone when something later, the predicate included, rejects it.
using Continuation = std::function<bool(Match&)>;

bool bind(const std::string& name, Node* n, Match& m) {
  auto [it, inserted] = m.bound.emplace(name, n);
  return inserted || it->second == n;
}

bool match_expr(const PatternNode& p, Node* n, bool commutative, Match m, const Continuation& k);

// Matches args[i...] to the op pattern's inputs i..., then continues with `k`.
bool match_args(const PatternNode& p, const std::vector<Node*>& args, size_t i, bool commutative,
                Match m, const Continuation& k) {
  if (i == args.size()) return k(m);
  if (args[i] == nullptr) return false;  // a plain number: no pattern input matches it
  return match_expr(*p.inputs[i], args[i], commutative, std::move(m),
                    [&](Match& next) { return match_args(p, args, i + 1, commutative, next, k); });
}

bool match_expr(const PatternNode& p, Node* n, bool commutative, Match m, const Continuation& k) {
  if (p.kind == PatternNode::Kind::Any) return bind(p.name, n, m) && k(m);
  if (n->kind() != NodeKind::Call || n->op() != p.op || n->is_multi_output()) return false;
  if (n->args().size() < p.inputs.size()) return false;
  if (!p.name.empty() && !bind(p.name, n, m)) return false;
  m.matched_ops.push_back(n);
  std::vector<Node*> args;
  for (size_t i = 0; i < p.inputs.size(); ++i) args.push_back(node_arg(n->args()[i]));
  if (match_args(p, args, 0, commutative, m, k)) return true;
  if (!commutative || !commutes(p.op) || args.size() != 2) return false;
  std::swap(args[0], args[1]);
  return match_args(p, args, 0, commutative, std::move(m), k);
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
  Match start;
  start.root = n;
  return match_expr(*p.expr, n, p.commutative, std::move(start), [&](Match& done) {
    if (p.predicate && !p.predicate(done)) return false;
    m = done;
    return true;
  });
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
