// coil::SymInt: a size that may be symbolic, as libtorch's c10::SymInt. Outside a capture, and
// in a static one, every size is a plain number. While coil::compile captures a dynamic graph
// (docs/dynamic.md), Tensor::sym_size and sym_sizes return the sizes as expressions over the
// graph's size symbols (s0, s1, ...), and arithmetic on them stays symbolic: code that passes
// them to the _symint ops (view_symint, reshape_symint, expand_symint, zeros_symint, ...) gets a
// graph that serves every size.
//
//   SymInt b = x.sym_size(0), t = x.sym_size(1);
//   Tensor heads = x.view_symint({b, t, 8, -1});   // [s0, s1, 8, 64] for every batch and length
//
// A SymInt becomes a plain number only explicitly (guard_int(), or a cast to int64_t), and the
// graph is then specialised to that value with a guard; a comparison (==, <, ...) decides with
// the value at capture and guards the relation it found, as torch does with `if x.size(0) > 8`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coil {

namespace detail {
struct SymNode;  // the expression and its graph's ShapeEnv (src/api/symint.cpp)
}

class SymInt {
 public:
  SymInt(int64_t value = 0) : hint_(value) {}  // NOLINT: a plain number converts implicitly
  SymInt(int value) : hint_(value) {}          // NOLINT
  SymInt(int64_t hint, std::shared_ptr<const detail::SymNode> node)
      : hint_(hint), node_(std::move(node)) {}

  bool is_symbolic() const { return node_ != nullptr; }
  // The value it has at capture (its value, for a plain number).
  int64_t hint() const { return hint_; }
  // The value as a plain number; in a dynamic capture the graph is specialised to it.
  int64_t guard_int() const;
  explicit operator int64_t() const { return guard_int(); }
  std::string str() const;  // "s0*s1", or the number
  const std::shared_ptr<const detail::SymNode>& node() const { return node_; }

  friend SymInt operator+(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a, const SymInt& b);
  friend SymInt operator*(const SymInt& a, const SymInt& b);
  friend SymInt operator/(const SymInt& a, const SymInt& b);  // floor division: sizes are >= 0
  friend SymInt operator%(const SymInt& a, const SymInt& b);
  friend bool operator==(const SymInt& a, const SymInt& b);
  friend bool operator!=(const SymInt& a, const SymInt& b) { return !(a == b); }
  friend bool operator<(const SymInt& a, const SymInt& b);
  friend bool operator<=(const SymInt& a, const SymInt& b);
  friend bool operator>(const SymInt& a, const SymInt& b) { return b < a; }
  friend bool operator>=(const SymInt& a, const SymInt& b) { return b <= a; }

 private:
  int64_t hint_;
  std::shared_ptr<const detail::SymNode> node_;
};

using SymInts = std::vector<SymInt>;

// The hints of `sizes` as plain numbers (no guard: for messages and heuristics only).
std::vector<int64_t> hints_of(const SymInts& sizes);

}  // namespace coil
