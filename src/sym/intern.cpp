// Hash-consing: one global table owns every node, so equal structure means equal pointer.
// The hash is structural (not by address), so it is the same in every process.
#include "sym/intern.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_set>

#include <coil/error.h>

namespace coil::sym {
namespace {

size_t mix(size_t h, uint64_t v) {
  // splitmix64's finaliser over the running hash: cheap and well spread.
  uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<size_t>(x ^ (x >> 31));
}

struct NodeHash {
  size_t operator()(const Node* n) const { return n->hash(); }
};

// Operands are interned already, so comparing them by pointer is structural equality.
struct NodeEqual {
  bool operator()(const Node* a, const Node* b) const {
    return a->kind() == b->kind() && a->value() == b->value() && a->name() == b->name() &&
           a->args() == b->args() &&
           (a->kind() != Kind::Var || (a->range() == b->range() && a->bound() == b->bound()));
  }
};

struct Table {
  std::mutex mutex;
  std::unordered_set<const Node*, NodeHash, NodeEqual> nodes;
  std::vector<std::unique_ptr<Node>> owned;  // freed at exit, so leak checkers stay quiet
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

Expr Interner::get(Kind kind, int64_t value, const std::string& name, std::vector<Expr> args,
                   Range range, Expr bound) {
  Node probe;
  probe.kind_ = kind;
  probe.value_ = value;
  probe.name_ = name;
  probe.args_ = std::move(args);
  probe.range_ = range;
  probe.bound_ = bound;
  size_t h = mix(0, static_cast<uint64_t>(kind));
  h = mix(h, static_cast<uint64_t>(value));
  for (char c : name) h = mix(h, static_cast<unsigned char>(c));
  if (kind == Kind::Var) h = mix(mix(mix(h, range.lo), range.hi), bound ? bound->hash() : 0);
  for (Expr a : probe.args_) h = mix(h, a->hash());
  probe.hash_ = h;

  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.nodes.find(&probe);
  if (it != t.nodes.end()) return Expr(*it);
  t.owned.push_back(std::unique_ptr<Node>(new Node(std::move(probe))));
  t.nodes.insert(t.owned.back().get());
  return Expr(t.owned.back().get());
}

Expr detail::make(Kind kind, std::vector<Expr> args) {
  Range r = range_of(kind, args);
  return Interner::get(kind, 0, std::string(), std::move(args), r);
}

Expr constant(int64_t v) { return Interner::get(Kind::Const, v, std::string(), {}, {v, v}); }

Expr var(const std::string& name, Range range) {
  COIL_ASSERT(!name.empty() && range.lo <= range.hi, "variable '", name, "' with range [", range.lo,
              ", ", range.hi, "]");
  return Interner::get(Kind::Var, 0, name, {}, range);
}

// A loop of 0 iterations never evaluates its body, so any range is sound for its index;
// [0, 0] keeps interval arithmetic on well-formed intervals.
Expr index_var(const std::string& name, int64_t size) {
  COIL_ASSERT(size >= 0, "index variable '", name, "' of a loop over ", size, " iterations");
  return var(name, {0, size > 0 ? size - 1 : 0});
}

Expr size_var(const std::string& name) { return var(name, {2, kMaxSize}); }

Expr index_var(const std::string& name, Expr size) {
  if (size->is_const()) return index_var(name, size->value());
  COIL_ASSERT(size->range().lo >= 0, "index variable '", name, "' of a loop over ", to_string(size),
              " iterations");
  return Interner::get(Kind::Var, 0, name, {}, {0, std::max<int64_t>(size->range().hi - 1, 0)},
                       size);
}

}  // namespace coil::sym
