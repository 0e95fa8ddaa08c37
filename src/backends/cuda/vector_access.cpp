#include "backends/cuda/vector_access.h"

#include <algorithm>

#include "backends/cuda/cuda_expr.h"
#include "ir/value.h"

namespace coil::cuda {

std::optional<sym::Expr> unit_offset(sym::Expr index, sym::Expr i, int64_t width,
                                     bool across_runs) {
  sym::Expr offset = index - i;
  if (sym::depends_on(offset, i)) {
    if (!across_runs || !sym::same_over_aligned_runs(offset, i, width)) return std::nullopt;
    return sym::substitute(offset, {{i, sym::index_var("coil_base", i->range().hi + 1)}});
  }
  if (offset->is_const() && offset->value() % width != 0) return std::nullopt;
  return offset;
}

std::string VectorAccess::at() const {
  return offset->is_const(0) ? buffer : buffer + " + (" + sym::to_c(offset) + ")";
}

std::string VectorAccess::type() const {
  return std::string("coil_vec<") + memory_type(dtype) + ", " + std::to_string(width) + ">";
}

std::string VectorAccess::load(const std::string& i) const {
  const std::string address = "reinterpret_cast<const " + type() + "*>(" + at() + " + " + i + ")";
  return stream ? "coil_ld_stream(" + address + ")" : "*" + address;
}

std::string VectorAccess::aligned() const {
  return "coil_vec_aligned<" + std::to_string(width) + ">(" + at() + ")";
}

std::vector<VectorAccess> vector_accesses(const std::vector<const schedule::KernelNode*>& nodes,
                                          sym::Expr var,
                                          const std::function<bool(const std::string&)>& computed,
                                          int64_t width, bool across_runs) {
  std::vector<VectorAccess> out;
  auto add = [&](const std::string& buffer, sym::Expr offset, DType dtype, bool store) {
    VectorAccess a{buffer, offset, dtype, store, "coil_v" + std::to_string(out.size()),
                   "",     false,  width};
    if (std::none_of(out.begin(), out.end(),
                     [&](const VectorAccess& o) { return o.same_element(a); }))
      out.push_back(std::move(a));
  };
  for (const schedule::KernelNode* n : nodes) {
    if (!n->store || n->reduce) continue;
    std::optional<sym::Expr> offset = unit_offset(n->store_index, var, width, across_runs);
    if (!offset) return {};
    add(n->buffer, *offset, n->dtype, true);
  }
  for (const schedule::KernelNode* n : nodes)
    ir::for_each_load(n->body, [&](const ir::ValueNode& load) {
      if (load.is_indirect() || computed(load.buffer())) return;
      if (std::optional<sym::Expr> offset = unit_offset(load.index(), var, width, across_runs))
        add(load.buffer(), *offset, load.dtype(), false);
    });
  return out;
}

std::vector<VectorAccess> pointwise_vector_accesses(
    const std::vector<const schedule::KernelNode*>& nodes, sym::Expr var,
    const std::function<bool(const std::string&)>& computed) {
  std::vector<VectorAccess> four = vector_accesses(nodes, var, computed, kVector, true);
  size_t narrowest = 8;
  for (const VectorAccess& a : four) narrowest = std::min(narrowest, itemsize(a.dtype));
  if (four.empty() || narrowest != 2) return four;
  std::vector<VectorAccess> eight = vector_accesses(nodes, var, computed, kWideVector, true);
  return eight.size() == four.size() ? eight : four;
}

std::vector<VectorAccess> cache_rows(const std::vector<std::vector<VectorAccess>>& passes,
                                     int64_t vectors) {
  constexpr int64_t kCachedBytes = 256;  // 64 registers
  std::vector<VectorAccess> out;
  int64_t bytes = 0;
  auto reads = [](const std::vector<VectorAccess>& pass, const VectorAccess& a) {
    return std::any_of(pass.begin(), pass.end(),
                       [&](const VectorAccess& b) { return !b.store && b.same_element(a); });
  };
  for (size_t p = 0; p < passes.size(); ++p)
    for (const VectorAccess& a : passes[p]) {
      if (a.store || reads(out, a)) continue;
      const bool again = std::any_of(passes.begin() + static_cast<std::ptrdiff_t>(p) + 1,
                                     passes.end(), [&](const auto& q) { return reads(q, a); });
      const int64_t size = vectors * a.width * static_cast<int64_t>(itemsize(a.dtype));
      if (!again || bytes + size > kCachedBytes) continue;
      bytes += size;
      out.push_back(a);
      out.back().cache = "coil_row" + std::to_string(out.size() - 1);
    }
  return out;
}

std::optional<std::string> run_uniform(sym::Expr index, sym::Expr var, int64_t width) {
  if (sym::same_over_aligned_runs(index, var, width)) return "";
  for (const sym::Expr& s : sym::free_vars(index)) {
    if (s == var) continue;
    const sym::Expr q = sym::var(s->name() + "_run", {1, s->range().hi / width});
    if (sym::same_over_aligned_runs(sym::substitute(index, {{s, q * width}}), var, width))
      return sym::to_c(s) + " % " + std::to_string(width) + " == 0";
  }
  return std::nullopt;
}

std::string aligned(const std::vector<std::vector<VectorAccess>>& passes) {
  std::vector<std::string> checks;
  for (const std::vector<VectorAccess>& pass : passes)
    for (const VectorAccess& a : pass)
      if (std::find(checks.begin(), checks.end(), a.aligned()) == checks.end())
        checks.push_back(a.aligned());
  std::string all;
  for (const std::string& c : checks) all += (all.empty() ? "" : " && ") + c;
  return all.empty() ? "true" : all;
}

}  // namespace coil::cuda
