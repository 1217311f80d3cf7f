// Codec policies from the control plane, by version, and which one a tensor's step runs under.
//
// Every gateway of a job receives the same versions, though not at the same moment: one may poll
// the controller late on a loaded machine. A tensor switches to version v at a step at or past
// v's `effective_step` only once every gateway holds v, as the tensor's previous step showed
// (each message of a step carries the versions its senders hold: HeldPolicies). All gateways see
// the same previous step, so all of them switch at the same step boundary and none fails a step
// for a policy it received late. The version travels in every frame, and frames of another
// version are refused. A tensor the policy does not name, or any tensor before the first policy,
// runs with the configured codec. Should a step succeed on one gateway and fail on another right
// there, their next steps may differ by a version; the one behind catches up once it sees the
// newer version in the others' messages (Mailbox::newest_peer_policy), at worst after one more
// failed step. Not thread-safe: the gateway guards it with its own lock.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "gateway/collective/envelope.h"

namespace gradgate::gateway {

struct CodecPolicy {
  uint32_t version = 0;  // > 0; increases with every new policy of the job
  uint64_t effective_step = 0;
  std::map<std::string, std::string> codec_by_tensor;  // this gateway's codec spec per tensor name
};

class PolicyTable {
 public:
  /// Keeps `policy` if it is newer than every version held; false (and nothing kept) otherwise.
  /// Drops the versions below `floor`, the oldest version a tensor runs under (a tensor never
  /// goes back to an older one), and beyond kMaxKept the oldest ones.
  bool add(CodecPolicy policy, uint32_t floor);
  /// The newest version in effect at `step` among those `held_by_all` names, or nullptr: none
  /// of them is (the tensor stays under its version).
  const CodecPolicy* in_effect(uint64_t step, HeldPolicies held_by_all) const;
  /// Version `version` if held, else nullptr.
  const CodecPolicy* find(uint32_t version) const;
  /// The versions held: the newest received and those before it without a gap.
  HeldPolicies held() const;
  /// The newest version received (0: none).
  uint32_t latest_version() const;

 private:
  // Versions received, oldest first. A version another gateway may still choose must stay: the
  // cap is only reached by a tensor that has not stepped while this many versions came.
  static constexpr size_t kMaxKept = 1024;
  std::deque<CodecPolicy> versions_;
};

}  // namespace gradgate::gateway
