#include "schedule/loops.h"

#include <coil/error.h>

#include "runtime/tensor_impl.h"

namespace coil::schedule {

namespace {

std::vector<sym::Expr> loop_vars(const SymShape& sizes, const char* prefix) {
  std::vector<sym::Expr> out;
  for (size_t k = 0; k < sizes.size(); ++k)
    out.push_back(sym::index_var(prefix + std::to_string(k),
                                 sizes[k]->is_const(0) ? sym::constant(1) : sizes[k]));
  return out;
}

sym::Bindings bindings_of(const std::vector<sym::Expr>& vars,
                          const std::vector<sym::Expr>& values) {
  sym::Bindings b;
  for (size_t k = 0; k < vars.size(); ++k) b.emplace(vars[k], values[k]);
  return b;
}

// Every index expression a kernel evaluates: stores, loads and index values.
std::vector<sym::Expr> index_exprs(const Kernel& k) {
  std::vector<sym::Expr> out;
  for (const KernelNode& n : k.nodes) {
    out.push_back(n.store_index);
    ir::any_node(n.body, [&](const ir::ValueNode& v) {
      if (v.index()) out.push_back(v.index());
      return false;
    });
  }
  return out;
}

void substitute(Kernel& k, const sym::Bindings& b) {
  for (KernelNode& n : k.nodes) {
    n.body = ir::substitute(n.body, b);
    n.store_index = sym::substitute(n.store_index, b);
  }
}

// Loops j and j+1 merge when each expression steps by the same amount along the merged loop:
// stride(j) == stride(j+1) * size(j+1) (strides over size symbols compare as expressions).
bool mergeable(const std::vector<sym::Expr>& exprs, sym::Expr a, sym::Expr b, sym::Expr size_b) {
  for (sym::Expr e : exprs) {
    sym::Expr sa = sym::stride(e, a), sb = sym::stride(e, b);
    if (!sa || !sb || sa != sb * size_b) return false;
  }
  return true;
}

// Merges adjacent loops of one level (outer or inner) and drops loops of size 1.
void simplify_level(Kernel& k, SymShape& sizes, std::vector<sym::Expr>& vars, const char* prefix) {
  for (size_t j = 0; j < sizes.size();) {
    if (sizes[j]->is_const(1) && sizes.size() > 1) {
      substitute(k, {{vars[j], sym::constant(0)}});
      sizes.erase(sizes.begin() + static_cast<long>(j));
      vars.erase(vars.begin() + static_cast<long>(j));
      continue;
    }
    ++j;
  }
  for (size_t j = sizes.size(); j-- > 1;) {
    if (!mergeable(index_exprs(k), vars[j - 1], vars[j], sizes[j])) continue;
    // Over a size 0 nothing runs, so any split of the merged index is as good.
    if (sizes[j]->is_const(0) || sizes[j - 1]->is_const(0)) continue;
    sym::Expr merged = sizes[j - 1] * sizes[j];
    // A name no other loop of this kernel has (the final renaming below tidies it).
    sym::Expr y = sym::index_var(std::string(prefix) + "_merged" + std::to_string(j - 1), merged);
    substitute(k, {{vars[j - 1], sym::floordiv(y, sizes[j])}, {vars[j], sym::mod(y, sizes[j])}});
    sizes[j - 1] = merged;
    vars[j - 1] = y;
    sizes.erase(sizes.begin() + static_cast<long>(j));
    vars.erase(vars.begin() + static_cast<long>(j));
  }
  // Final names: prefix0, prefix1, ... in loop order.
  std::vector<sym::Expr> fresh = loop_vars(sizes, prefix);
  substitute(k, bindings_of(vars, fresh));
  vars = fresh;
}

// The point of a computation over `ranges` that the kernel's loops (`vars` over `sizes`, flat
// index `flat`) are at. Where the two shapes are the same but for dims of size 1, the loop
// variables themselves (a dropped dim's index is 0); else through the flat index, whose
// division by sizes known only at run time the simplifier cannot always undo (a cache of
// run-time length indexed as (x0 + x1 + s0*x0) % (s0 + 1) for x1).
std::vector<sym::Expr> point_of(const SymShape& ranges, const SymShape& sizes,
                                const std::vector<sym::Expr>& vars, const sym::Expr& flat) {
  std::vector<sym::Expr> point;
  size_t j = 0;
  for (const sym::Expr& r : ranges) {
    if (r->is_const(1)) {
      point.push_back(sym::constant(0));
      continue;
    }
    while (j < sizes.size() && sizes[j]->is_const(1)) ++j;
    if (j == sizes.size() || sizes[j] != r) return ir::unravel(flat, ranges);
    point.push_back(vars[j++]);
  }
  while (j < sizes.size() && sizes[j]->is_const(1)) ++j;
  return j == sizes.size() ? point : ir::unravel(flat, ranges);
}

}  // namespace

LoopNest loop_nest(const std::vector<const ir::Buffer*>& members) {
  const ir::Computation* anchor = &*members.front()->compute;
  for (const ir::Buffer* b : members)
    if (b->compute->is_reduction()) {
      anchor = &*b->compute;
      break;
    }
  LoopNest l;
  l.outer = anchor->ranges;
  l.inner = anchor->reduction_ranges;
  l.xs = loop_vars(l.outer, "x");
  l.rs = loop_vars(l.inner, "r");
  return l;
}

KernelNode translate(const ir::Buffer& b, const LoopNest& loops) {
  const ir::Computation& c = *b.compute;
  bool reduction_kernel = !loops.rs.empty() || !sym_numel(loops.inner)->is_const(1);
  sym::Expr outer_flat = ir::ravel(loops.xs, loops.outer);
  sym::Bindings bindings;
  KernelNode n;
  n.buffer = b.name;
  n.reduce = c.reduce;
  n.dtype = b.layout.dtype;
  std::vector<sym::Expr> vars;
  if (c.is_reduction()) {
    vars = point_of(c.ranges, loops.outer, loops.xs, outer_flat);
    bindings = bindings_of(c.rvars, point_of(c.reduction_ranges, loops.inner, loops.rs,
                                             ir::ravel(loops.rs, loops.inner)));
    n.inner = true;
  } else if (reduction_kernel && sym_numel(c.ranges) != sym_numel(loops.outer)) {
    sym::Expr flat = outer_flat * sym_numel(loops.inner) + ir::ravel(loops.rs, loops.inner);
    SymShape all = loops.outer;
    all.insert(all.end(), loops.inner.begin(), loops.inner.end());
    std::vector<sym::Expr> all_vars = loops.xs;
    all_vars.insert(all_vars.end(), loops.rs.begin(), loops.rs.end());
    vars = point_of(c.ranges, all, all_vars, flat);
    n.inner = true;
  } else {
    vars = point_of(c.ranges, loops.outer, loops.xs, outer_flat);
  }
  for (size_t k = 0; k < c.vars.size(); ++k) bindings.emplace(c.vars[k], vars[k]);
  n.body = ir::substitute(c.body, bindings);
  n.store_index = b.layout.address(vars);
  return n;
}

Kernel build_kernel(const std::vector<const ir::Buffer*>& members, int number) {
  LoopNest loops = loop_nest(members);
  Kernel k;
  for (const ir::Buffer* b : members) {
    k.nodes.push_back(translate(*b, loops));
    for (const std::string& op : b->origin_ops) ir::add_once(k.ops, op);
  }
  k.outer = loops.outer;
  k.inner = loops.inner;
  k.outer_vars = loops.xs;
  k.inner_vars = loops.rs;
  bool reduction = false;
  for (const KernelNode& n : k.nodes) reduction |= n.reduce.has_value();
  if (k.outer.empty()) {  // a 0-d result: one outer iteration
    k.outer = {sym::constant(1)};
    k.outer_vars = loop_vars(k.outer, "x");
  }
  simplify_level(k, k.outer, k.outer_vars, "x");
  if (reduction) {
    if (k.inner.empty()) {
      k.inner = {sym::constant(1)};
      k.inner_vars = loop_vars(k.inner, "r");
    }
    simplify_level(k, k.inner, k.inner_vars, "r");
  }
  k.name = fused_name(reduction ? "red" : "poi", k.ops, number);
  return k;
}

std::string to_string(const Kernel& k) {
  if (!k.parts.empty()) {
    std::string out = k.name + ": combo of " + std::to_string(k.parts.size()) +
                      " independent loop nests in one parallel region\n";
    for (const Kernel& part : k.parts) out += "  " + to_string(part);
    return out;
  }
  auto dims = [](const SymShape& s, const std::vector<sym::Expr>& v) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i)
      out += (i ? ", " : "") + sym::to_string(v[i]) + " < " + sym::to_string(s[i]);
    return out;
  };
  std::string out = k.name + ": for " + dims(k.outer, k.outer_vars);
  if (k.is_reduction()) out += "; reduce " + dims(k.inner, k.inner_vars);
  out += "\n";
  for (const KernelNode& n : k.nodes) {
    out += "    " + n.buffer + (n.store ? "" : " (register)") + "[" +
           sym::to_string(n.store_index) + "] = ";
    if (n.reduce) out += std::string(ir::reduce_kind_name(*n.reduce)) + " ";
    out += ir::to_string(n.body) + (n.inner && !n.reduce && k.is_reduction() ? "  (inner)" : "") +
           "\n";
  }
  return out;
}

}  // namespace coil::schedule
