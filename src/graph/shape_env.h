// Dynamic shapes at the graph level (torch's ShapeEnv). A dynamic graph's sizes are
// expressions over size symbols (s0, s1, ...: a dimension of an input, known only at run
// time); each symbol keeps the value it had at capture (its hint), which the graph's concrete
// metas hold. Whatever the graph relies on about the symbols beyond being sizes >= 2 (two of
// them equal, one below a constant, one fixed to its hint) is a guard: a relation the call's
// sizes must satisfy for the graph to be reused.
//
// Every decision is taken with the hints and then guarded, so capture and the compiler see one
// consistent world: the one where each symbol has its hint, generalised to every assignment
// that passes the guards.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/tensor_impl.h"
#include "sym/shape.h"

namespace coil {

// A tensor's geometry over size symbols: TensorMeta's sizes, strides and storage offset as
// expressions (constants where static).
struct SymLayout {
  SymShape sizes, strides;
  sym::Expr offset;

  static SymLayout of(const TensorMeta& m);  // every entry a constant
  static SymLayout contiguous(SymShape sizes);
  bool is_static() const;
  bool operator==(const SymLayout&) const = default;
};

// One relation a dynamic graph relies on: lhs OP rhs.
struct SymGuard {
  enum class Kind : uint8_t { Eq, Ne, Lt, Le };
  Kind kind;
  sym::Expr lhs, rhs;
  std::string reason;

  bool holds(const std::unordered_map<sym::Expr, int64_t>& values) const;
  // The same with s<k> taking sizes[k] (the guard check's hot path: no map).
  bool holds_at(const int64_t* sizes) const;
  std::string str() const;  // "s1 == s0  (add: broadcasting x and y)"
};

class ShapeEnv {
 public:
  struct Symbol {
    sym::Expr var;
    int64_t hint;
    std::string source;  // where its value comes from: "x.size(0)"
  };

  // A new size symbol for a value `hint` (>= 2) found at `source`.
  sym::Expr create_symbol(int64_t hint, const std::string& source);

  // The value at capture.
  int64_t hint(sym::Expr e) const;
  Shape hints(const SymShape& s) const;
  // `e` with what the env learned applied: symbols found equal to another expression (unified)
  // or fixed to their hint (specialised) are replaced.
  sym::Expr simplify(sym::Expr e) const;
  SymShape simplify(const SymShape& s) const;

  // Decide a relation with the hints and guard the decision; the result is the decision.
  // Relations that hold for every size (by the expressions' ranges) need no guard.
  bool eq(sym::Expr a, sym::Expr b, const std::string& reason);
  bool lt(sym::Expr a, sym::Expr b, const std::string& reason);
  bool le(sym::Expr a, sym::Expr b, const std::string& reason);
  // The value of `e` as a plain number: guards e == hint(e) (a lone symbol is specialised).
  int64_t guard_int(sym::Expr e, const std::string& reason);
  // A guard a compile of the same graph made before (the compiled-graph cache keeps them):
  // added unless already there. False, adding nothing, when the hints break it (the cached
  // code was made for other sizes).
  bool restore_guard(const SymGuard& g);

  const std::vector<Symbol>& symbols() const { return symbols_; }
  const std::vector<SymGuard>& guards() const { return guards_; }
  const std::unordered_map<sym::Expr, int64_t>& hint_values() const { return hints_; }
  // Symbols replaced by an expression of others (or a constant): the guard check binds every
  // symbol from its source and checks each replacement as a guard.
  const std::unordered_map<sym::Expr, sym::Expr>& replacements() const { return replacements_; }

  // Called with each event (a symbol created, a guard added, a symbol specialised), for
  // COIL_LOGS=dynamic; the env itself logs nothing.
  std::function<void(const std::string&)> on_event;

 private:
  void add_guard(SymGuard::Kind kind, sym::Expr a, sym::Expr b, const std::string& reason);
  void replace(sym::Expr var, sym::Expr by, const std::string& reason);
  void event(const std::string& text) const;

  std::vector<Symbol> symbols_;
  std::unordered_map<sym::Expr, int64_t> hints_;
  std::unordered_map<sym::Expr, sym::Expr> replacements_;
  std::vector<SymGuard> guards_;
};

}  // namespace coil
