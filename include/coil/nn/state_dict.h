// nn::StateDict: an ordered map from names to tensors, what Module::state_dict() returns and
// load_safetensors reads (PyTorch's OrderedDict[str, Tensor]).
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <coil/tensor.h>

namespace coil::nn {

class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;
  using const_iterator = std::vector<Item>::const_iterator;

  StateDict() = default;
  StateDict(std::initializer_list<Item> items);

  // Appends a new key; a key already present is an error (coil::Error naming it).
  void insert(std::string key, Tensor value);
  // Replaces the value of a key in place, or appends it.
  void insert_or_assign(std::string key, Tensor value);
  // Removes a key (true) or does nothing (false); the order of the rest is kept.
  bool erase(const std::string& key);

  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  const Tensor* find(const std::string& key) const;  // nullptr when absent
  // The value of `key`; an absent key is a coil::Error listing a few of the keys present.
  const Tensor& at(const std::string& key) const;
  const Tensor& operator[](const std::string& key) const { return at(key); }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const;
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  const std::vector<Item>& items() const { return items_; }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace coil::nn
