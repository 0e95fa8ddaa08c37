#include <coil/nn/state_dict.h>

#include <algorithm>
#include <sstream>

namespace coil::nn {

StateDict::StateDict(std::initializer_list<Item> items) {
  for (const Item& it : items) insert(it.first, it.second);
}

void StateDict::insert(std::string key, Tensor value) {
  COIL_CHECK(!contains(key), "StateDict: the key '", key,
             "' is already present; use insert_or_assign to replace its value");
  index_.emplace(key, items_.size());
  items_.emplace_back(std::move(key), std::move(value));
}

void StateDict::insert_or_assign(std::string key, Tensor value) {
  if (auto it = index_.find(key); it != index_.end()) {
    items_[it->second].second = std::move(value);
    return;
  }
  insert(std::move(key), std::move(value));
}

bool StateDict::erase(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(it->second));
  index_.clear();
  for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
  return true;
}

const Tensor* StateDict::find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

const Tensor& StateDict::at(const std::string& key) const {
  if (const Tensor* t = find(key)) return *t;
  std::ostringstream os;
  const size_t shown = std::min<size_t>(items_.size(), 8);
  for (size_t i = 0; i < shown; ++i) os << (i ? ", " : "") << "'" << items_[i].first << "'";
  if (shown < items_.size()) os << ", ... (" << items_.size() << " keys)";
  throw Error("StateDict: no key '" + key +
              "'; the keys are: " + (items_.empty() ? std::string("(none)") : os.str()));
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const Item& it : items_) out.push_back(it.first);
  return out;
}

}  // namespace coil::nn
