// The graph as TORCH_LOGS=graph_code prints it. parse_graph (parser.cpp) reads this text
// back, so any change here needs the matching change there.
#include "graph/printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>

#include "runtime/convert.h"

namespace coil {

std::string meta_str(const TensorMeta& m) {
  std::string s = std::string(dtype_short_name(m.dtype)) + shape_str(m.sizes) +
                  shape_str(m.strides) + m.device.str();
  if (m.offset != 0) s += "+" + std::to_string(m.offset);
  return s;
}

std::string meta_str(const TensorMeta& m, const SymLayout& l) {
  if (l.is_static()) return meta_str(m);
  std::string s = std::string(dtype_short_name(m.dtype)) + sym_shape_str(l.sizes) +
                  sym_shape_str(l.strides) + m.device.str();
  if (!l.offset->is_const(0))
    s += "+" + (l.offset->kind() == sym::Kind::Add ? "(" + sym::to_string(l.offset) + ")"
                                                   : sym::to_string(l.offset));
  return s;
}

namespace {

// The shortest decimal text that reads back (through a double, as the parser reads it) to
// the very same element: 0.1f prints as "0.1", not "0.10000000149011612".
template <typename T>
std::string element_str(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(static_cast<int64_t>(v));
  } else {
    double d = static_cast<double>(static_cast<acc_type<T>>(v));
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    char buf[32];
    for (int prec = 1; prec <= 17; ++prec) {
      std::snprintf(buf, sizeof buf, "%.*g", prec, d);
      T back = convert<T>(std::strtod(buf, nullptr));
      if (std::memcmp(&back, &v, sizeof(T)) == 0) break;
    }
    std::string s = buf;
    if (s.find_first_of(".en") == std::string::npos) s += ".0";  // reads as a float
    return s;
  }
}

// A constant's values, flat in row-major order (its annotation gives the shape).
std::string values_str(const Tensor& t) {
  std::string s = "[";
  dispatch_dtype(t.dtype(), [&]<typename T>() {
    const T* p = static_cast<const T*>(t.data_ptr());  // constants are contiguous
    for (int64_t i = 0; i < t.numel(); ++i) s += (i ? ", " : "") + element_str(p[i]);
  });
  return s + "]";
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string arg_str(const NodeArg& a) {
  if (auto* n = std::get_if<Node*>(&a)) return (*n)->name();
  if (auto* v = std::get_if<std::vector<Node*>>(&a)) {
    std::string s = "[";
    for (size_t i = 0; i < v->size(); ++i) s += (i ? ", " : "") + (*v)[i]->name();
    return s + "]";
  }
  return format_literal(to_arg(a, [](const Node*) { return Tensor(); }));
}

// Positional until an argument equal to its default is skipped; keywords after that.
std::string call_args_str(const Node& n) {
  const auto& params = op_info(n.op()).schema.args;
  std::string s;
  bool skipped = false;
  for (size_t i = 0; i < n.args().size(); ++i) {
    const ArgSchema& p = params.at(i);
    if (p.default_value && to_node_arg(*p.default_value) == n.args()[i]) {
      skipped = true;
      continue;
    }
    s += (s.empty() ? "" : ", ") + (skipped ? p.name + "=" : "") + arg_str(n.args()[i]);
  }
  return s;
}

std::string annotated(const Node& n) {
  if (n.meta().size() != 1) return n.name();
  return n.name() + ": \"" + meta_str(n.tensor_meta(), n.sym_layout()) + "\"";
}

}  // namespace

std::string print_node(const Node& n) {
  switch (n.kind()) {
    case NodeKind::Placeholder:
      return annotated(n);
    case NodeKind::Parameter:
      return annotated(n) + " = coil.parameter(" + quoted(n.target()) + ")";
    case NodeKind::Constant:
      return annotated(n) + " = coil.constant(" + values_str(n.value()) + ")";
    case NodeKind::Call:
      return annotated(n) + " = coil." + op_name(n.op()) + "(" + call_args_str(n) + ")";
    case NodeKind::GetItem:
      return annotated(n) + " = " + n.source()->name() + "[" + std::to_string(n.index()) + "]";
    case NodeKind::Output: {
      const auto& r = n.results();
      std::string s = "return (";
      for (size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + r[i]->name();
      return s + (r.size() == 1 ? ",)" : ")");
    }
  }
  return "";
}

std::string print_graph(const Graph& g, bool hints) {
  std::string s;
  if (hints && g.shape_env() && g.is_dynamic()) {
    // What the symbols stood for at capture: the parser needs them to compute the metas.
    s = "# hints:";
    for (const ShapeEnv::Symbol& sym : g.shape_env()->symbols())
      s += " " + sym::to_string(sym.var) + "=" + std::to_string(sym.hint);
    s += "\n";
  }
  s += "def forward(self";
  for (const Node* p : g.placeholders()) s += ", " + print_node(*p);
  s += "):\n";
  for (const Node* n : g.nodes())
    if (n->kind() != NodeKind::Placeholder) s += "    " + print_node(*n) + "\n";
  return s;
}

std::ostream& operator<<(std::ostream& os, const Graph& g) { return os << print_graph(g); }

}  // namespace coil
