// nn::Module: registration, traversal and look-ups by dotted name.
#include <coil/nn/module.h>

#include <cxxabi.h>

#include <cstdlib>
#include <typeinfo>
#include <unordered_set>

namespace coil::nn {

std::string Module::name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string full = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  // "coil::nn::Linear" -> "Linear"; a template's arguments stay as they are.
  size_t end = full.find('<');
  size_t colon = full.rfind("::", end);
  return colon == std::string::npos ? full : full.substr(colon + 2);
}

Tensor Module::forward(const Tensor& input) {
  throw Error("nn::" + name() +
              ": this module has no forward(Tensor); override `Tensor forward(const Tensor&)` in "
              "it, or call the forward overload it does define");
}

void Module::check_new_name(const std::string& name, const char* what) const {
  COIL_CHECK(!name.empty(), "nn::", this->name(), "::", what, ": the name must not be empty");
  COIL_CHECK(name.find('.') == std::string::npos, "nn::", this->name(), "::", what, ": the name '",
             name, "' must not contain '.' (dotted names are built from the module tree)");
  for (const Entry& e : params_)
    COIL_CHECK(e.name != name, "nn::", this->name(), "::", what, ": '", name,
               "' is already a parameter of this module");
  for (const Entry& e : buffers_)
    COIL_CHECK(e.name != name, "nn::", this->name(), "::", what, ": '", name,
               "' is already a buffer of this module");
  for (const auto& c : children_)
    COIL_CHECK(c.first != name, "nn::", this->name(), "::", what, ": '", name,
               "' is already a submodule of this module");
}

Tensor Module::register_parameter(const std::string& name, Tensor param, bool requires_grad) {
  check_new_name(name, "register_parameter");
  if (param.defined()) {
    COIL_CHECK(param.has_storage(), "nn::", this->name(), "::register_parameter: '", name,
               "' is a tensor without data (made while capturing a compiled function?); "
               "register a real tensor");
    COIL_CHECK(!requires_grad || param.is_floating_point(), "nn::", this->name(),
               "::register_parameter: '", name, "' has dtype ", dtype_name(param.dtype()),
               "; only floating-point parameters can require grad (register an integer tensor "
               "as a buffer, or pass requires_grad=false)");
    COIL_CHECK(param.is_leaf(), "nn::", this->name(), "::register_parameter: '", name,
               "' is the result of an op recorded for autograd (not a leaf tensor); register "
               "t.detach(), or compute it under NoGradGuard");
    param.requires_grad_(requires_grad);
  }
  params_.push_back({name, param, true});
  return param;
}

Tensor Module::register_buffer(const std::string& name, Tensor buffer, bool persistent) {
  check_new_name(name, "register_buffer");
  COIL_CHECK(!buffer.defined() || buffer.has_storage(), "nn::", this->name(),
             "::register_buffer: '", name,
             "' is a tensor without data (made while capturing a compiled function?); register a "
             "real tensor");
  buffers_.push_back({name, buffer, persistent});
  return buffer;
}

void Module::add_module(const std::string& name, ModulePtr module) {
  check_new_name(name, "register_module");
  COIL_CHECK(module != nullptr, "nn::", this->name(), "::register_module: '", name,
             "' is a null module pointer");
  COIL_CHECK(module.get() != this, "nn::", this->name(), "::register_module: '", name,
             "' is this module itself; a module cannot contain itself");
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, bool dedupe,
                     std::vector<std::pair<std::string, const Module*>>& out) const {
  if (dedupe)
    for (const auto& seen : out)
      if (seen.second == this) return;
  out.emplace_back(prefix, this);
  for (const auto& [child_name, child] : children_)
    child->collect(prefix.empty() ? child_name : prefix + "." + child_name, dedupe, out);
}

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out;
  collect("", true, out);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  for (const auto& [n, m] : std::as_const(*this).named_modules())
    out.emplace_back(n, const_cast<Module*>(m));
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_tensors(bool params, bool recurse,
                                                                  bool dedupe,
                                                                  bool persistent_only) const {
  std::vector<std::pair<std::string, const Module*>> mods;
  if (recurse)
    collect("", dedupe, mods);
  else
    mods.emplace_back("", this);
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& [prefix, m] : mods) {
    for (const Entry& e : params ? m->params_ : m->buffers_) {
      if (!e.tensor.defined() || (persistent_only && !e.persistent)) continue;
      if (dedupe && !seen.insert(e.tensor.impl()).second) continue;
      out.emplace_back(prefix.empty() ? e.name : prefix + "." + e.name, e.tensor);
    }
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  return named_tensors(true, recurse, true);
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  return named_tensors(false, recurse, true);
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<ModulePtr> Module::children() const {
  std::vector<ModulePtr> out;
  for (const auto& c : children_) out.push_back(c.second);
  return out;
}

// The module that owns the last component of `target`; `leaf` gets that component.
const Module& Module::submodule_of(const std::string& target, std::string& leaf,
                                   const char* what) const {
  const Module* m = this;
  std::string path;
  size_t start = 0;
  while (true) {
    size_t dot = target.find('.', start);
    if (dot == std::string::npos) break;
    std::string part = target.substr(start, dot - start);
    const Module* next = nullptr;
    for (const auto& [n, c] : m->children_)
      if (n == part) next = c.get();
    COIL_CHECK(next != nullptr, "nn::", name(), "::", what, "('", target,
               "'): ", path.empty() ? std::string("this module") : "'" + path + "'", " (",
               m->name(), ") has no submodule '", part, "'");
    path += (path.empty() ? "" : ".") + part;
    m = next;
    start = dot + 1;
  }
  leaf = target.substr(start);
  return *m;
}

Tensor Module::get_parameter(const std::string& target) const {
  std::string leaf;
  const Module& m = submodule_of(target, leaf, "get_parameter");
  for (const Entry& e : m.params_)
    if (e.name == leaf) return e.tensor;
  throw Error("nn::" + name() + "::get_parameter('" + target + "'): " + m.name() +
              " has no parameter '" + leaf + "'");
}

Tensor Module::get_buffer(const std::string& target) const {
  std::string leaf;
  const Module& m = submodule_of(target, leaf, "get_buffer");
  for (const Entry& e : m.buffers_)
    if (e.name == leaf) return e.tensor;
  throw Error("nn::" + name() + "::get_buffer('" + target + "'): " + m.name() + " has no buffer '" +
              leaf + "'");
}

ModulePtr Module::get_submodule(const std::string& target) const {
  std::string leaf;
  const Module& m = submodule_of(target, leaf, "get_submodule");
  for (const auto& [n, c] : m.children_)
    if (n == leaf) return c;
  throw Error("nn::" + name() + "::get_submodule('" + target + "'): " + m.name() +
              " has no submodule '" + leaf + "'");
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_) c->apply(fn);
  fn(*this);
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
  return *this;
}

}  // namespace coil::nn
