#include "capture/guards.h"

#include <coil/autograd.h>

#include <sstream>

#include "graph/autocast.h"

namespace coil::capture {

namespace {
TensorGuard guard_tensor(const Tensor& t) {
  TensorGuard g;
  g.defined = t.defined();
  if (!g.defined) return g;
  const TensorMeta& m = t.impl()->meta;
  g.dtype = m.dtype;
  g.device = m.device;
  g.requires_grad = t.impl()->requires_grad;
  g.sizes = m.sizes;
  g.strides = m.strides;
  return g;
}

// A dynamic input's geometry: static dims as captured, each symbolic one binding its symbol in
// `sizes` (each symbol has one source), then the strides those sizes give.
bool geometry_matches(const TensorGuard& g, const TensorMeta& m, int64_t* sizes) {
  const size_t n = g.symbols.size();
  if (m.sizes.size() != n) return false;
  for (size_t d = 0; d < n; ++d) {
    if (g.symbols[d] < 0) {
      if (m.sizes[d] != g.sizes[d]) return false;
    } else {
      sizes[g.symbols[d]] = m.sizes[d];
    }
  }
  if (g.sym_strides.empty()) return m.strides == g.strides;
  for (size_t d = 0; d < n; ++d)
    if (m.strides[d] != evaluate_sizes(g.sym_strides[d], sizes)) return false;
  return true;
}

// `sizes` receives a dynamic input's symbol values (unused for a static one).
bool matches(const TensorGuard& g, const Tensor& t, int64_t* sizes = nullptr) {
  if (!t.defined()) return !g.defined;
  if (!g.defined) return false;
  const TensorImpl& impl = *t.impl();
  if (impl.meta.dtype != g.dtype || impl.meta.device != g.device ||
      impl.requires_grad != g.requires_grad)
    return false;
  if (!g.symbols.empty()) return geometry_matches(g, impl.meta, sizes);
  return impl.meta.sizes == g.sizes && impl.meta.strides == g.strides;
}

// The symbol values' buffer of a check: on the stack for a handful of symbols.
class SizeValues {
 public:
  explicit SizeValues(int n) {
    if (n > kStack) heap_.resize(static_cast<size_t>(n));
  }
  int64_t* data() { return heap_.empty() ? stack_ : heap_.data(); }

 private:
  static constexpr int kStack = 16;
  int64_t stack_[kStack] = {};
  std::vector<int64_t> heap_;
};

ArgGuard::Kind kind_of(const detail::Value& v) {
  switch (v.index()) {
    case 0:
      return ArgGuard::Kind::Tensor;
    case 1:
      return ArgGuard::Kind::TensorList;
    case 2:
      return ArgGuard::Kind::Int;
    case 3:
      return ArgGuard::Kind::Float;
    default:
      return ArgGuard::Kind::Bool;
  }
}

std::string name_of(size_t i, const std::vector<std::string>& names) {
  return i < names.size() ? names[i] : "arg" + std::to_string(i);
}

// The first difference between a guard and a tensor, in words.
std::string tensor_difference(const TensorGuard& g, const Tensor& t) {
  std::ostringstream os;
  if (!t.defined() || !g.defined) return t.defined() ? "became defined" : "became undefined";
  if (t.dtype() != g.dtype) {
    os << "dtype changed " << dtype_name(g.dtype) << " -> " << dtype_name(t.dtype());
  } else if (t.device() != g.device) {
    os << "device changed " << g.device.str() << " -> " << t.device().str();
  } else if (t.requires_grad() != g.requires_grad) {
    os << std::boolalpha << "requires_grad changed " << g.requires_grad << " -> "
       << t.requires_grad();
  } else if (t.dim() != static_cast<int64_t>(g.sizes.size())) {
    os << "dim changed " << g.sizes.size() << " -> " << t.dim();
  } else {
    for (size_t d = 0; d < g.sizes.size(); ++d) {
      if ((g.symbols.empty() || g.symbols[d] < 0) && t.sizes()[d] != g.sizes[d]) {
        os << "size[" << d << "] changed " << g.sizes[d] << " -> " << t.sizes()[d];
        return os.str();
      }
    }
    if (!g.symbols.empty()) {
      os << "strides " << shape_str(t.strides()) << " are not " << sym_shape_str(g.sym_strides)
         << " for its sizes";
      return os.str();
    }
    for (size_t d = 0; d < g.strides.size(); ++d) {
      if (t.strides()[d] != g.strides[d]) {
        os << "stride[" << d << "] changed " << g.strides[d] << " -> " << t.strides()[d];
        return os.str();
      }
    }
  }
  return os.str();
}
}  // namespace

Guards Guards::from_inputs(const detail::ValueList& inputs) {
  Guards g;
  g.grad_mode_ = grad_mode_enabled();
  g.autocast_ = autocast_state();
  for (const auto& v : inputs) {
    ArgGuard a;
    a.kind = kind_of(v);
    if (auto* t = std::get_if<Tensor>(&v)) a.tensors.push_back(guard_tensor(*t));
    if (auto* l = std::get_if<std::vector<Tensor>>(&v))
      for (const auto& t : *l) a.tensors.push_back(guard_tensor(t));
    if (auto* i = std::get_if<int64_t>(&v)) a.i = *i;
    if (auto* d = std::get_if<double>(&v)) a.d = *d;
    if (auto* b = std::get_if<bool>(&v)) a.b = *b;
    g.args_.push_back(std::move(a));
  }
  return g;
}

void Guards::guard_captured(const Graph& graph) {
  for (const Node* n : graph.nodes())
    if (n->kind() == NodeKind::Parameter)
      captured_.push_back({n->value(), n->name(), guard_tensor(n->value())});
}

void Guards::guard_symbols(const Graph& graph) {
  const std::shared_ptr<ShapeEnv>& env = graph.shape_env();
  if (!env || env->symbols().empty()) return;
  num_symbols_ = static_cast<int>(env->symbols().size());
  for (const ShapeEnv::Symbol& s : env->symbols()) sources_.push_back(s.source);
  relations_ = env->guards();
  std::vector<Node*> placeholders = graph.placeholders();
  size_t next = 0;
  for (ArgGuard& a : args_) {
    for (TensorGuard& t : a.tensors) {
      const Node* p = placeholders.at(next++);
      const SymLayout l = p->sym_layout(0, /*as_made=*/true);
      if (l.is_static()) continue;
      t.symbols.clear();
      for (sym::Expr e : l.sizes)
        t.symbols.push_back(is_size_symbol(e) ? size_symbol_index(e) : -1);
      t.sym_strides = l.strides;
    }
  }
}

std::vector<uint64_t> Guards::changed_sizes(const detail::ValueList& inputs) const {
  std::vector<uint64_t> out;
  for (size_t k = 0; k < args_.size() && k < inputs.size(); ++k) {
    std::vector<Tensor> ts;
    if (auto* t = std::get_if<Tensor>(&inputs[k])) ts.push_back(*t);
    if (auto* l = std::get_if<std::vector<Tensor>>(&inputs[k])) ts = *l;
    for (size_t j = 0; j < ts.size(); ++j) {
      uint64_t mask = 0;
      const TensorGuard* g = j < args_[k].tensors.size() ? &args_[k].tensors[j] : nullptr;
      if (g && g->defined && ts[j].defined() && ts[j].dtype() == g->dtype &&
          ts[j].device() == g->device && ts[j].dim() == static_cast<int64_t>(g->sizes.size()))
        for (size_t d = 0; d < g->sizes.size() && d < 64; ++d)
          if ((g->symbols.empty() || g->symbols[d] < 0) && ts[j].sizes()[d] != g->sizes[d])
            mask |= uint64_t{1} << d;
      out.push_back(mask);
    }
  }
  return out;
}

bool Guards::arg_matches(const ArgGuard& a, const detail::Value& v, int64_t* sizes) const {
  if (kind_of(v) != a.kind) return false;
  switch (a.kind) {
    case ArgGuard::Kind::Tensor:
      return matches(a.tensors[0], std::get<Tensor>(v), sizes);
    case ArgGuard::Kind::TensorList: {
      const auto& l = std::get<std::vector<Tensor>>(v);
      if (l.size() != a.tensors.size()) return false;
      for (size_t j = 0; j < l.size(); ++j)
        if (!matches(a.tensors[j], l[j], sizes)) return false;
      return true;
    }
    case ArgGuard::Kind::Int:
      return std::get<int64_t>(v) == a.i;
    case ArgGuard::Kind::Float: {
      double d = std::get<double>(v);
      return d == a.d || (d != d && a.d != a.d);
    }
    case ArgGuard::Kind::Bool:
      return std::get<bool>(v) == a.b;
  }
  return false;
}

bool Guards::check(const detail::ValueList& inputs) const {
  if (inputs.size() != args_.size() || grad_mode_ != grad_mode_enabled() ||
      autocast_ != autocast_state())
    return false;
  for (const CapturedGuard& c : captured_)
    if (!matches(c.guard, c.tensor)) return false;
  SizeValues sizes(num_symbols_);
  for (size_t k = 0; k < args_.size(); ++k)
    if (!arg_matches(args_[k], inputs[k], sizes.data())) return false;
  for (const SymGuard& r : relations_)
    if (!r.holds_at(sizes.data())) return false;
  return true;
}

std::optional<std::string> Guards::why_not(const detail::ValueList& inputs,
                                           const std::vector<std::string>& names) const {
  if (inputs.size() != args_.size())
    return "argument count changed " + std::to_string(args_.size()) + " -> " +
           std::to_string(inputs.size());
  if (grad_mode_ != grad_mode_enabled())
    return std::string("grad mode changed ") + (grad_mode_ ? "on -> off" : "off -> on");
  if (autocast_ != autocast_state())
    return "autocast changed " + autocast_state_str(autocast_) + " -> " +
           autocast_state_str(autocast_state());
  for (const CapturedGuard& c : captured_)
    if (!matches(c.guard, c.tensor))
      return "captured tensor '" + c.name + "' " + tensor_difference(c.guard, c.tensor);
  SizeValues sizes(num_symbols_);
  for (size_t k = 0; k < args_.size(); ++k) {
    if (arg_matches(args_[k], inputs[k], sizes.data())) continue;
    const ArgGuard& a = args_[k];
    const detail::Value& v = inputs[k];
    std::string name = name_of(k, names);
    std::ostringstream os;
    if (kind_of(v) != a.kind) {
      os << "argument '" << name << "' changed kind";
    } else if (a.kind == ArgGuard::Kind::Tensor) {
      os << "tensor '" << name << "' " << tensor_difference(a.tensors[0], std::get<Tensor>(v));
    } else if (a.kind == ArgGuard::Kind::TensorList) {
      const auto& l = std::get<std::vector<Tensor>>(v);
      if (l.size() != a.tensors.size()) {
        os << "tensor list '" << name << "' length changed " << a.tensors.size() << " -> "
           << l.size();
      } else {
        for (size_t j = 0; j < l.size(); ++j) {
          if (matches(a.tensors[j], l[j])) continue;
          os << "tensor '" << name << "[" << j << "]' " << tensor_difference(a.tensors[j], l[j]);
          break;
        }
      }
    } else if (a.kind == ArgGuard::Kind::Int) {
      os << "int '" << name << "' changed " << a.i << " -> " << std::get<int64_t>(v);
    } else if (a.kind == ArgGuard::Kind::Float) {
      os << "float '" << name << "' changed " << a.d << " -> " << std::get<double>(v);
    } else {
      os << "bool '" << name << "' changed " << a.b << " -> " << std::get<bool>(v);
    }
    return os.str();
  }
  for (const SymGuard& r : relations_) {
    if (r.holds_at(sizes.data())) continue;
    std::string values;
    for (int s = 0; s < num_symbols_; ++s)
      values += (s ? ", s" : "s") + std::to_string(s) + " = " + std::to_string(sizes.data()[s]);
    return "size guard " + r.str() + " failed with " + values;
  }
  return std::nullopt;
}

namespace {
void tensor_line(std::ostream& os, const std::string& n, const TensorGuard& g) {
  if (!g.defined) {
    os << n << ": undefined tensor\n";
    return;
  }
  std::string sizes = shape_str(g.sizes), strides = shape_str(g.strides);
  if (!g.symbols.empty()) {
    sizes = "[";
    for (size_t d = 0; d < g.symbols.size(); ++d)
      sizes += (d ? ", " : "") +
               (g.symbols[d] < 0 ? std::to_string(g.sizes[d]) : "s" + std::to_string(g.symbols[d]));
    sizes += "]";
    strides = sym_shape_str(g.sym_strides);
  }
  os << n << ": " << dtype_name(g.dtype) << " sizes " << sizes << " strides " << strides << " "
     << g.device.str() << (g.requires_grad ? " requires_grad" : "") << "\n";
}
}  // namespace

std::string Guards::captured_str() const {
  std::ostringstream os;
  for (const CapturedGuard& c : captured_) tensor_line(os, "captured " + c.name, c.guard);
  return os.str();
}

std::string Guards::str(const std::vector<std::string>& names) const {
  std::ostringstream os;
  os << "grad mode: " << (grad_mode_ ? "on" : "off") << "\n";
  if (autocast_) os << "autocast: " << autocast_state_str(autocast_) << "\n";
  for (size_t k = 0; k < args_.size(); ++k) {
    const ArgGuard& a = args_[k];
    std::string name = name_of(k, names);
    switch (a.kind) {
      case ArgGuard::Kind::Tensor:
        tensor_line(os, name, a.tensors[0]);
        break;
      case ArgGuard::Kind::TensorList:
        os << name << ": list of " << a.tensors.size() << " tensors\n";
        for (size_t j = 0; j < a.tensors.size(); ++j)
          tensor_line(os, name + "[" + std::to_string(j) + "]", a.tensors[j]);
        break;
      case ArgGuard::Kind::Int:
        os << name << " == " << a.i << "\n";
        break;
      case ArgGuard::Kind::Float:
        os << name << " == " << Scalar(a.d).str() << "\n";
        break;
      case ArgGuard::Kind::Bool:
        os << name << " == " << (a.b ? "True" : "False") << "\n";
        break;
    }
  }
  for (int s = 0; s < num_symbols_; ++s) os << "s" << s << " = " << sources_[s] << "\n";
  for (const SymGuard& r : relations_) os << r.str() << "\n";
  return os.str() + captured_str();
}

}  // namespace coil::capture
