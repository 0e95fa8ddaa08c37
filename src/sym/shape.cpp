#include "sym/shape.h"

#include <algorithm>

#include <coil/error.h>

namespace coil {

SymShape sym_constants(const std::vector<int64_t>& s) {
  SymShape out;
  out.reserve(s.size());
  for (int64_t v : s) out.push_back(sym::constant(v));
  return out;
}

sym::Expr sym_numel(const SymShape& s) {
  sym::Expr n = sym::constant(1);
  for (sym::Expr e : s) n = n * e;
  return n;
}

SymShape sym_contiguous_strides(const SymShape& s) {
  SymShape strides(s.size());
  sym::Expr acc = sym::constant(1);
  for (size_t k = s.size(); k-- > 0;) {
    strides[k] = acc;
    acc = s[k]->is_const(0) ? acc : acc * s[k];
  }
  return strides;
}

bool is_static(const SymShape& s) {
  for (sym::Expr e : s)
    if (!e->is_const()) return false;
  return true;
}

std::vector<int64_t> const_values(const SymShape& s) {
  std::vector<int64_t> out;
  for (sym::Expr e : s) {
    COIL_ASSERT(e->is_const(),
                "a size known only at run time where a number is needed: ", sym::to_string(e));
    out.push_back(e->value());
  }
  return out;
}

std::string sym_shape_str(const SymShape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + sym::to_string(s[i]);
  return out + "]";
}

bool is_size_symbol(sym::Expr e) {
  return e->kind() == sym::Kind::Var && e->range() == sym::Range{2, sym::kMaxSize} &&
         e->name().size() > 1 && e->name()[0] == 's' && !e->bound();
}

int size_symbol_index(sym::Expr e) {
  COIL_ASSERT(is_size_symbol(e), sym::to_string(e), " is not a size symbol");
  return std::stoi(e->name().substr(1));
}

void collect_size_symbols(sym::Expr e, std::vector<sym::Expr>& out) {
  if (!e || e->is_const()) return;
  for (sym::Expr v : sym::free_vars(e)) {
    if (is_size_symbol(v)) out.push_back(v);
    if (v->bound()) collect_size_symbols(v->bound(), out);  // a loop index over a size
  }
}

void sort_size_symbols(std::vector<sym::Expr>& symbols) {
  std::sort(symbols.begin(), symbols.end(),
            [](sym::Expr a, sym::Expr b) { return size_symbol_index(a) < size_symbol_index(b); });
  symbols.erase(std::unique(symbols.begin(), symbols.end()), symbols.end());
}

int64_t evaluate_sizes(sym::Expr e, const int64_t* sizes) {
  const std::vector<sym::Expr>& a = e->args();
  switch (e->kind()) {
    case sym::Kind::Const:
      return e->value();
    case sym::Kind::Var:
      return sizes[size_symbol_index(e)];
    case sym::Kind::Add:
    case sym::Kind::Mul: {
      int64_t r = evaluate_sizes(a[0], sizes);
      for (size_t i = 1; i < a.size(); ++i)
        r = e->kind() == sym::Kind::Add ? r + evaluate_sizes(a[i], sizes)
                                        : r * evaluate_sizes(a[i], sizes);
      return r;
    }
    case sym::Kind::FloorDiv:
    case sym::Kind::Mod: {
      int64_t n = evaluate_sizes(a[0], sizes), d = evaluate_sizes(a[1], sizes);
      int64_t q = n / d - ((n % d != 0 && (n < 0) != (d < 0)) ? 1 : 0);
      return e->kind() == sym::Kind::FloorDiv ? q : n - q * d;
    }
    case sym::Kind::Min:
      return std::min(evaluate_sizes(a[0], sizes), evaluate_sizes(a[1], sizes));
    case sym::Kind::Max:
      return std::max(evaluate_sizes(a[0], sizes), evaluate_sizes(a[1], sizes));
  }
  return 0;
}

}  // namespace coil
