// A pattern matcher for graph rewrites (the idea of Inductor's pattern_matcher.py, in C++):
// a pattern is a small tree of ops whose leaves are named wildcards,
//
//   op(OpId::add, {op(OpId::mm, {any("a"), any("b")}, "mm"), any("bias")})
//
// plus an optional predicate over what it bound and a replacement that builds the new nodes.
// apply_patterns tries every pattern at every node until none matches.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace coil {

struct PatternNode;
using PatternExpr = std::shared_ptr<const PatternNode>;

struct PatternNode {
  enum class Kind { Any, Op } kind;
  // Any: the binding's name (required). Op: optional, binds the matched call.
  std::string name;
  OpId op{};
  // Op: patterns for the call's first inputs.size() arguments, which must be tensors (nodes);
  // the arguments after them are not looked at (a predicate can).
  std::vector<PatternExpr> inputs;
};

// Matches any node (not a plain number); the same name twice must match the same node.
PatternExpr any(std::string name);
// Matches a single-output call of `op` whose leading arguments match `inputs`.
PatternExpr op(OpId op, std::vector<PatternExpr> inputs, std::string name = "");

// What a pattern matched: the node at its root and the nodes bound to names.
struct Match {
  Node* root = nullptr;
  std::map<std::string, Node*> bound;
  // The nodes the pattern's ops matched, root first: the replacement makes them dead unless
  // something else uses them.
  std::vector<Node*> matched_ops;

  Node* operator[](const std::string& name) const;  // InternalError when the name is unbound
};

struct Pattern {
  std::string name;  // in the log, for every rewrite it makes
  PatternExpr expr;
  // Whether add and mul nodes of `expr` also match with their two operands swapped.
  bool commutative = false;
  // When set, a match counts only where this returns true (another way of matching the same
  // node, with commutative operands swapped, is then tried).
  std::function<bool(const Match&)> predicate;
  // Builds the nodes that compute the root's value, inserted before the root, and returns the
  // one that takes the root's place: the same dtype and sizes.
  std::function<Node*(Graph&, const Match&)> replacement;
};

// Whether `p` matches at `n` (predicate included); fills `m` when it does.
bool match_pattern(const Pattern& p, Node* n, Match& m);

// Rewrites every match of every pattern (the first pattern that matches a node wins), repeating
// until none matches; each rewrite is logged (COIL_LOGS=passes) with the pattern's name.
// Returns whether anything changed.
bool apply_patterns(Graph& g, const std::vector<Pattern>& patterns);

}  // namespace coil
