// nn::Module checkpoints: state_dict, load_state_dict, and their safetensors files.
#include <coil/nn/module.h>
#include <coil/nn/safetensors.h>

#include <sstream>

#include "runtime/copy.h"
#include "runtime/tensor_impl.h"

namespace coil::nn {

StateDict Module::state_dict() const {
  // As PyTorch: per module its parameters, then its persistent buffers, then its children's.
  // A tensor shared by two modules is saved under both names.
  std::vector<std::pair<std::string, const Module*>> mods;
  collect("", false, mods);
  StateDict out;
  for (const auto& [prefix, m] : mods) {
    auto key = [&](const std::string& n) { return prefix.empty() ? n : prefix + "." + n; };
    for (const Entry& e : m->params_)
      if (e.tensor.defined()) out.insert(key(e.name), e.tensor.detach());
    for (const Entry& e : m->buffers_)
      if (e.tensor.defined() && e.persistent) out.insert(key(e.name), e.tensor.detach());
  }
  return out;
}

namespace {
std::string quoted_list(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", " : "") + ("\"" + keys[i] + "\"");
  return s;
}
}  // namespace

LoadResult Module::load_state_dict(const StateDict& dict, bool strict) {
  StateDict own = state_dict();
  LoadResult result;
  std::vector<std::string> mismatches;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source)
  for (const auto& [key, dst] : own) {
    const Tensor* src = dict.find(key);
    if (!src) {
      result.missing_keys.push_back(key);
      continue;
    }
    if (!src->defined()) {
      mismatches.push_back("\"" + key + "\" is an undefined tensor in the state dict");
      continue;
    }
    if (src->sizes() != dst.sizes()) {
      mismatches.push_back("size mismatch for " + key + ": copying a tensor of shape " +
                           shape_str(src->sizes()) + " from the state dict, the shape in the " +
                           "current model is " + shape_str(dst.sizes()));
      continue;
    }
    COIL_CHECK(src->has_storage(), "nn::", name(), "::load_state_dict: \"", key,
               "\" is a tensor without data (made while capturing a compiled function?)");
    copies.emplace_back(dst, *src);
  }
  for (const auto& [key, src] : dict)
    if (!own.contains(key)) result.unexpected_keys.push_back(key);

  std::ostringstream errors;
  if (strict && !result.missing_keys.empty())
    errors << "\n  Missing key(s) in state_dict: " << quoted_list(result.missing_keys) << ".";
  if (strict && !result.unexpected_keys.empty())
    errors << "\n  Unexpected key(s) in state_dict: " << quoted_list(result.unexpected_keys) << ".";
  for (const std::string& m : mismatches) errors << "\n  " << m << ".";
  if (!errors.str().empty()) {
    std::string hint = strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty())
                           ? "\n  (pass strict=false to load the matching keys only)"
                           : "";
    throw Error("nn::" + name() + "::load_state_dict: error(s) in loading state_dict for " +
                name() + ":" + errors.str() + hint);
  }
  // The copies bypass autograd (as PyTorch's load_state_dict does under no_grad), converting
  // the dtype where the checkpoint's differs; each counts as an in-place write (what was
  // computed from the old values, such as a convolution's reordered weight, is stale).
  for (const auto& [dst, src] : copies) {
    bool same_memory = dst.dtype() == src.dtype() && dst.strides() == src.strides() &&
                       dst.data_ptr() == src.data_ptr();  // its own state_dict loaded back
    if (same_memory) continue;
    copy_into(dst, src);
    ++dst.impl()->storage->version;
  }
  return result;
}

void Module::save(const std::string& path) const { save_safetensors(path, state_dict()); }

LoadResult Module::load(const std::string& path, bool strict) {
  StateDict dict = load_safetensors(path);
  try {
    return load_state_dict(dict, strict);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "\n  (while loading " + path + ")");
  }
}

}  // namespace coil::nn
