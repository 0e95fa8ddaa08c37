#include "graph/interpreter.h"

#include <unordered_map>

namespace coil {

namespace {

// A dynamic graph's input: static dims as the meta says, each symbolic one binding its symbol
// (the same symbol twice must get the same size).
bool fits(const Node& p, const Tensor& t, std::unordered_map<sym::Expr, int64_t>& symbols) {
  const SymShape sizes = p.sym_layout(0, /*as_made=*/true).sizes;
  if (sizes.size() != static_cast<size_t>(t.dim())) return false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t n = t.sizes()[d];
    if (sizes[d]->is_const()) {
      if (sizes[d]->value() != n) return false;
    } else if (is_size_symbol(sizes[d])) {
      if (symbols.emplace(sizes[d], n).first->second != n) return false;
    } else {
      return false;  // inputs are laid out over plain symbols
    }
  }
  return true;
}

void check_input(const Node& p, const Tensor& t, size_t i,
                 std::unordered_map<sym::Expr, int64_t>& symbols) {
  const TensorMeta& m = p.tensor_meta();
  COIL_CHECK(t.defined(), "interpret: input ", i, " ('", p.name(), "') is an undefined tensor");
  const bool dynamic = p.graph()->shape_env() != nullptr;
  COIL_CHECK(t.dtype() == m.dtype && t.device() == m.device &&
                 (dynamic ? fits(p, t, symbols) : t.sizes() == m.sizes),
             "interpret: input ", i, " ('", p.name(), "') must be ", dtype_short_name(m.dtype),
             dynamic ? sym_shape_str(p.sym_layout().sizes) : shape_str(m.sizes), " on ",
             m.device.str(), " but got ", dtype_short_name(t.dtype()), shape_str(t.sizes()), " on ",
             t.device().str(), "; pass tensors like the ones the graph was built for");
  COIL_CHECK(t.has_storage(), "interpret: input ", i, " ('", p.name(),
             "') has no data (a proxy or meta tensor)");
}

// A symbolic int argument at this call's sizes.
Arg at_sizes(Arg a, const std::unordered_map<sym::Expr, int64_t>& symbols) {
  if (auto* s = std::get_if<SymIntArg>(&a)) return sym::evaluate(s->expr, symbols);
  if (auto* s = std::get_if<SymIntsArg>(&a)) {
    Shape out;
    for (sym::Expr e : s->exprs) out.push_back(sym::evaluate(e, symbols));
    return out;
  }
  return a;
}

}  // namespace

std::vector<Tensor> interpret(const Graph& g, const std::vector<Tensor>& inputs,
                              const InterpretHooks& hooks) {
  std::vector<Node*> placeholders = g.placeholders();
  if (inputs.size() != placeholders.size()) {
    std::string names;
    for (const Node* p : placeholders) names += (names.empty() ? "" : ", ") + p->name();
    COIL_CHECK(false, "interpret: the graph takes ", placeholders.size(), " inputs (", names,
               ") but got ", inputs.size());
  }
  Node* out = g.output_node();
  COIL_CHECK(out != nullptr, "interpret: the graph has no output node; call Graph::output()");

  std::vector<Node*> nodes = g.nodes();
  // The last node to read each value, so the value can be dropped right after it.
  std::unordered_map<const Node*, const Node*> last_use;
  for (const Node* n : nodes)
    for (const Node* in : n->inputs()) last_use[in] = n;

  std::unordered_map<const Node*, std::vector<Tensor>> env;
  std::unordered_map<sym::Expr, int64_t> symbols;  // a dynamic graph's sizes at this call
  if (hooks.check_inputs) {
    for (size_t i = 0; i < inputs.size(); ++i) check_input(*placeholders[i], inputs[i], i, symbols);
    // The guards over this graph's inputs (a half of a training graph shares its env with the
    // other half, whose inputs bind symbols this one does not see).
    auto bound = [&](sym::Expr e) {
      for (sym::Expr v : sym::free_vars(e))
        if (!symbols.count(v)) return false;
      return true;
    };
    if (const std::shared_ptr<ShapeEnv>& shapes = g.shape_env())
      for (const SymGuard& guard : shapes->guards())
        COIL_CHECK(!bound(guard.lhs) || !bound(guard.rhs) || guard.holds(symbols),
                   "interpret: the inputs' sizes break the graph's guard ", guard.str(),
                   "; pass sizes the graph was built for");
  }
  auto tensor_of = [&](const Node* n) { return env.at(n).at(0); };
  size_t next_input = 0;
  for (const Node* n : nodes) {
    switch (n->kind()) {
      case NodeKind::Placeholder:
        env[n] = {inputs[next_input++]};
        break;
      case NodeKind::Parameter:
        if (hooks.parameter) {
          env[n] = {hooks.parameter(*n)};
          break;
        }
        COIL_CHECK(n->value().has_storage(), "interpret: parameter '", n->name(), "' (\"",
                   n->target(), "\") has no data: the graph was parsed without a tensor for it; ",
                   "pass it in parse_graph's parameters map");
        env[n] = {n->value()};
        break;
      case NodeKind::Constant:
        env[n] = {n->value()};
        break;
      case NodeKind::Call: {
        std::vector<Arg> args;
        args.reserve(n->args().size());
        for (const NodeArg& a : n->args()) args.push_back(at_sizes(to_arg(a, tensor_of), symbols));
        env[n] = hooks.call ? hooks.call(*n, std::move(args)) : run_eager(n->op(), args);
        break;
      }
      case NodeKind::GetItem:
        env[n] = {env.at(n->source()).at(static_cast<size_t>(n->index()))};
        break;
      case NodeKind::Output: {
        std::vector<Tensor> results;
        for (const Node* r : n->results()) results.push_back(tensor_of(r));
        return results;
      }
    }
    for (const Node* in : n->inputs())
      if (last_use[in] == n) env.erase(in);
  }
  COIL_ASSERT(false, "interpret: the output node was not reached");
  return {};
}

}  // namespace coil
