#include "gateway/agreement/peer_versions.h"

#include <algorithm>

namespace gradgate::gateway {

void PeerVersions::note(uint32_t tensor_id, const SwitchStamp& stamp) {
  uint32_t& newest = newest_[tensor_id];
  newest = std::max(newest, stamp.version);
}

uint32_t PeerVersions::newest(uint32_t tensor_id) const {
  const auto found = newest_.find(tensor_id);
  return found == newest_.end() ? 0 : found->second;
}

}  // namespace gradgate::gateway
