#include "gateway/agreement/policy_table.h"

#include <iterator>
#include <utility>

namespace gradgate::gateway {

bool PolicyTable::add(CodecPolicy policy, uint32_t floor) {
  if (policy.version == 0 || policy.version <= latest_version()) return false;
  versions_.push_back(std::move(policy));
  while (versions_.size() > kMaxKept ||
         (versions_.size() > 1 && versions_.front().version < floor)) {
    versions_.pop_front();
  }
  return true;
}

const CodecPolicy* PolicyTable::in_effect(uint64_t step, HeldPolicies held_by_all) const {
  for (auto it = versions_.rbegin(); it != versions_.rend(); ++it) {
    if (it->version >= held_by_all.oldest && it->version <= held_by_all.newest &&
        it->effective_step <= step) {
      return &*it;
    }
  }
  return nullptr;
}

const CodecPolicy* PolicyTable::find(uint32_t version) const {
  for (const CodecPolicy& policy : versions_) {
    if (policy.version == version) return &policy;
  }
  return nullptr;
}

HeldPolicies PolicyTable::held() const {
  if (versions_.empty()) return {};
  auto oldest = versions_.rbegin();
  for (auto next = std::next(oldest);
       next != versions_.rend() && next->version + 1 == oldest->version; ++next) {
    oldest = next;
  }
  return {oldest->version, versions_.back().version};
}

uint32_t PolicyTable::latest_version() const {
  return versions_.empty() ? 0 : versions_.back().version;
}

}  // namespace gradgate::gateway
