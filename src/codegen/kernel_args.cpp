#include "codegen/kernel_args.h"

#include "graph/registry.h"
#include "runtime/tensor_impl.h"

namespace coil::codegen {

std::set<std::string> written(const schedule::Kernel& k) {
  std::set<std::string> out;
  for (const schedule::KernelNode& n : k.nodes)
    if (n.store) out.insert(n.buffer);
  return out;
}

std::vector<std::string> arguments(const schedule::Kernel& k) {
  std::map<std::string, const schedule::KernelNode*> made;
  for (const schedule::KernelNode& n : k.nodes) made[n.buffer] = &n;
  std::vector<std::string> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& b) {
    if (seen.insert(b).second) out.push_back(b);
  };
  for (const schedule::KernelNode& n : k.nodes) {
    ir::for_each_load(n.body, [&](const ir::ValueNode& l) {
      auto it = made.find(l.buffer());
      if (it == made.end() || it->second->store) add(l.buffer());
    });
    if (n.store) add(n.buffer);
  }
  return out;
}

// Computed buffers, and the fresh contiguous results of library calls (not inputs, constants,
// or extern views that alias them).
bool owned_dense(const ir::Buffer& b) {
  if (b.kind == ir::BufferKind::Computed) return true;
  return b.kind == ir::BufferKind::Extern && op_info(b.call->op).kind == OpKind::Extern &&
         b.layout.offset->is_const(0) && b.layout.strides == sym_contiguous_strides(b.layout.sizes);
}

std::vector<sym::Expr> kernel_symbols(const schedule::Kernel& k) {
  std::vector<sym::Expr> out;
  for (sym::Expr e : k.outer) collect_size_symbols(e, out);
  for (sym::Expr e : k.inner) collect_size_symbols(e, out);
  for (const schedule::KernelNode& n : k.nodes) {
    collect_size_symbols(n.store_index, out);
    ir::any_node(n.body, [&](const ir::ValueNode& v) {
      collect_size_symbols(v.index(), out);
      for (sym::Expr b : v.index_bounds()) collect_size_symbols(b, out);
      return false;
    });
  }
  for (const schedule::Kernel& part : k.parts) {
    std::vector<sym::Expr> more = kernel_symbols(part);
    out.insert(out.end(), more.begin(), more.end());
  }
  sort_size_symbols(out);
  return out;
}

std::vector<std::pair<std::string, std::string>> inplace_pairs(
    const schedule::Kernel& k, const ir::Program& p,
    const std::map<const schedule::KernelNode*, size_t>& pass_of) {
  std::vector<std::pair<std::string, std::string>> out;
  const bool rows = k.is_reduction();
  std::set<std::string> made, taken;
  for (const schedule::KernelNode& n : k.nodes) made.insert(n.buffer);
  auto pass = [&](const schedule::KernelNode& n) {
    auto it = pass_of.find(&n);
    return it == pass_of.end() ? 0 : it->second;
  };
  for (size_t i = 0; i < k.nodes.size(); ++i) {
    const schedule::KernelNode& n = k.nodes[i];
    if (!n.store || (rows && (!n.inner || n.reduce))) continue;
    const ir::Layout& wl = p.buffer(n.buffer).layout;
    std::map<std::string, bool> same_element;  // read buffer -> every read fits so far
    for (size_t j = 0; j < k.nodes.size(); ++j)
      ir::for_each_load(k.nodes[j].body, [&](const ir::ValueNode& l) {
        if (made.count(l.buffer())) return;
        const schedule::KernelNode& m = k.nodes[j];
        const bool fits = j <= i && l.index() == n.store_index &&
                          !(m.reduce == ir::ReduceKind::WelfordM2 && pass(m) == pass(n));
        auto [it, fresh] = same_element.emplace(l.buffer(), fits);
        if (!fresh) it->second = it->second && fits;
      });
    // (An input only where the caller writes this result back into it.)
    auto back = p.written_back.find(n.buffer);
    for (const auto& [r, fits] : same_element) {
      const ir::Buffer& rb = p.buffer(r);
      const bool ours = owned_dense(rb) || (back != p.written_back.end() && back->second == r);
      if (fits && !taken.count(r) && ours && rb.layout.dtype == wl.dtype &&
          rb.layout.numel() == wl.numel()) {
        out.push_back({n.buffer, r});
        taken.insert(r);
        break;
      }
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> combo_inplace_pairs(const schedule::Kernel& k,
                                                                     const ir::Program& p) {
  std::map<std::string, int> parts_of;
  for (const schedule::Kernel& part : k.parts)
    for (const std::string& a : arguments(part)) ++parts_of[a];
  std::vector<std::pair<std::string, std::string>> out;
  for (const schedule::Kernel& part : k.parts)
    for (const auto& pair : inplace_pairs(part, p, {}))
      if (parts_of[pair.second] == 1) out.push_back(pair);
  return out;
}

}  // namespace coil::codegen
