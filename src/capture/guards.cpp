#include "capture/guards.h"

#include <coil/autograd.h>

#include <sstream>

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

bool matches(const TensorGuard& g, const Tensor& t) {
  if (!t.defined()) return !g.defined;
  if (!g.defined) return false;
  const TensorImpl& impl = *t.impl();
  return impl.meta.dtype == g.dtype && impl.meta.device == g.device &&
         impl.requires_grad == g.requires_grad && impl.meta.sizes == g.sizes &&
         impl.meta.strides == g.strides;
}

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
      if (t.sizes()[d] != g.sizes[d]) {
        os << "size[" << d << "] changed " << g.sizes[d] << " -> " << t.sizes()[d];
        return os.str();
      }
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

bool Guards::check(const detail::ValueList& inputs) const {
  if (inputs.size() != args_.size() || grad_mode_ != grad_mode_enabled()) return false;
  for (const CapturedGuard& c : captured_)
    if (!matches(c.guard, c.tensor)) return false;
  for (size_t k = 0; k < args_.size(); ++k) {
    const ArgGuard& a = args_[k];
    const detail::Value& v = inputs[k];
    if (kind_of(v) != a.kind) return false;
    switch (a.kind) {
      case ArgGuard::Kind::Tensor:
        if (!matches(a.tensors[0], std::get<Tensor>(v))) return false;
        break;
      case ArgGuard::Kind::TensorList: {
        const auto& l = std::get<std::vector<Tensor>>(v);
        if (l.size() != a.tensors.size()) return false;
        for (size_t j = 0; j < l.size(); ++j)
          if (!matches(a.tensors[j], l[j])) return false;
        break;
      }
      case ArgGuard::Kind::Int:
        if (std::get<int64_t>(v) != a.i) return false;
        break;
      case ArgGuard::Kind::Float: {
        double d = std::get<double>(v);
        if (!(d == a.d || (d != d && a.d != a.d))) return false;
        break;
      }
      case ArgGuard::Kind::Bool:
        if (std::get<bool>(v) != a.b) return false;
        break;
    }
  }
  return true;
}

std::optional<std::string> Guards::why_not(const detail::ValueList& inputs,
                                           const std::vector<std::string>& names) const {
  if (inputs.size() != args_.size())
    return "argument count changed " + std::to_string(args_.size()) + " -> " +
           std::to_string(inputs.size());
  if (grad_mode_ != grad_mode_enabled())
    return std::string("grad mode changed ") + (grad_mode_ ? "on -> off" : "off -> on");
  for (const CapturedGuard& c : captured_)
    if (!matches(c.guard, c.tensor))
      return "captured tensor '" + c.name + "' " + tensor_difference(c.guard, c.tensor);
  for (size_t k = 0; k < args_.size(); ++k) {
    detail::ValueList one{inputs[k]};
    Guards single;
    single.grad_mode_ = grad_mode_;
    single.args_.push_back(args_[k]);
    if (single.check(one)) continue;
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
  return std::nullopt;
}

namespace {
void tensor_line(std::ostream& os, const std::string& n, const TensorGuard& g) {
  if (!g.defined) {
    os << n << ": undefined tensor\n";
    return;
  }
  os << n << ": " << dtype_name(g.dtype) << " sizes " << shape_str(g.sizes) << " strides "
     << shape_str(g.strides) << " " << g.device.str() << (g.requires_grad ? " requires_grad" : "")
     << "\n";
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
  return os.str() + captured_str();
}

}  // namespace coil::capture
