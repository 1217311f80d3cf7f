#include "gateway/agreement/switch_agreement.h"

#include <algorithm>
#include <utility>

namespace gradgate::gateway {

bool SwitchAgreement::add(CodecPolicy policy, uint32_t floor) {
  const uint32_t version = policy.version;
  if (!table_.add(std::move(policy), floor)) return false;
  received_ = version;
  return true;
}

const CodecPolicy* SwitchAgreement::due(const TensorAgreement& tensor, uint64_t step,
                                        uint32_t newest_of_peers) const {
  const CodecPolicy* policy =
      tensor.held_by_all ? table_.in_effect(step, *tensor.held_by_all) : nullptr;
  // A peer ran a newer version of this tensor: its last step succeeded where ours failed.
  if (const CodecPolicy* peers = table_.find(newest_of_peers);
      peers != nullptr && (policy == nullptr || peers->version > policy->version)) {
    policy = peers;
  }
  return policy == nullptr || policy->version <= tensor.version ? nullptr : policy;
}

void SwitchAgreement::applied(TensorAgreement& tensor, uint32_t version, bool off_policy) {
  tensor.off_policy = off_policy;
  tensor.version = version;
  applied_ = std::max(applied_, version);
}

void SwitchAgreement::step_ended(TensorAgreement& tensor,
                                 const std::optional<SwitchStamp>& final_stamp) {
  tensor.held_by_all = final_stamp ? std::optional(final_stamp->held) : std::nullopt;
}

void SwitchAgreement::step_failed(TensorAgreement& tensor, bool step_running) {
  if (!step_running) tensor.held_by_all.reset();
}

}  // namespace gradgate::gateway
