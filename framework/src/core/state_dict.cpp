#include "tiny/state_dict.h"

namespace tiny {

void StateDict::insert(const std::string& key, const Tensor& value) {
  TINY_CHECK(!contains(key), ValueError, "state dict already has a tensor named '", key, "'");
  index_[key] = items_.size();
  items_.emplace_back(key, value);
}

const Tensor& StateDict::at(const std::string& key) const {
  auto it = index_.find(key);
  if (it == index_.end()) {
    std::string known;
    for (size_t i = 0; i < items_.size() && i < 5; ++i) known += (i ? ", '" : "'") + items_[i].first + "'";
    if (items_.size() > 5) known += ", ...";
    TINY_THROW(IndexError, "state dict has no key '", key, "' (it has ", items_.size(), " keys",
               known.empty() ? "" : ": ", known, ")");
  }
  return items_[it->second].second;
}

}  // namespace tiny
