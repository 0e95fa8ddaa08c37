// Shapes over the index algebra: a tensor's sizes (or strides) as expressions, constants where
// a size is static and size variables where it is known only at run time (dynamic shapes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sym/expr.h"

namespace coil {

using SymShape = std::vector<sym::Expr>;

SymShape sym_constants(const std::vector<int64_t>& s);
sym::Expr sym_numel(const SymShape& s);
// Row-major strides (a size-0 dim leaves the strides before it as they were, as coil's
// contiguous_strides does).
SymShape sym_contiguous_strides(const SymShape& s);
bool is_static(const SymShape& s);
// The values of an all-constant shape (InternalError otherwise).
std::vector<int64_t> const_values(const SymShape& s);
std::string sym_shape_str(const SymShape& s);  // "[s0, 768]"

// Size symbols (sym::size_var, named s0, s1, ...): whether `e` is one, its number, and the
// ones an expression reads, in number order.
bool is_size_symbol(sym::Expr e);
int size_symbol_index(sym::Expr e);
void collect_size_symbols(sym::Expr e, std::vector<sym::Expr>& out);
void sort_size_symbols(std::vector<sym::Expr>& symbols);  // by number, without repeats
// The value of an expression over size symbols only, s<k> taking sizes[k] (the compiled code's
// evaluation: no map to build).
int64_t evaluate_sizes(sym::Expr e, const int64_t* sizes);

}  // namespace coil
