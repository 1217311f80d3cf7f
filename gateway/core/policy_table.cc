#include "gateway/core/policy_table.h"

#include <utility>

namespace gradgate::gateway {

bool PolicyTable::add(CodecPolicy policy) {
  if (policy.version == 0 || policy.version <= latest_version()) return false;
  versions_.push_back(std::move(policy));
  if (versions_.size() > kKept) versions_.pop_front();
  return true;
}

const CodecPolicy* PolicyTable::in_effect(uint64_t step) const {
  for (auto it = versions_.rbegin(); it != versions_.rend(); ++it) {
    if (it->effective_step <= step) return &*it;
  }
  return nullptr;
}

uint32_t PolicyTable::latest_version() const {
  return versions_.empty() ? 0 : versions_.back().version;
}

}  // namespace gradgate::gateway
