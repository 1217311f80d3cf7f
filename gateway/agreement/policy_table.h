// The control plane's codec policies by version, as a gateway received them, and which one a
// tensor's step may run under given the versions every gateway holds (switch_agreement.h says
// when). Not thread-safe: the step runner guards it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "gateway/agreement/switch_stamp.h"

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
