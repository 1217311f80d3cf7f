// Codec policies from the control plane, by version, and which one a tensor's step runs under.
//
// Every gateway of a job receives the same versions and applies version v from step
// `effective_step` of each tensor on, so all of them switch at the same step boundary (the
// version travels in every frame, and frames of another version are refused). A tensor the
// policy does not name, or any tensor before the first policy, runs with the configured codec.
// Not thread-safe: the gateway guards it with its own lock.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

namespace gradgate::gateway {

struct CodecPolicy {
  uint32_t version = 0;  // > 0; increases with every new policy of the job
  uint64_t effective_step = 0;
  std::map<std::string, std::string> codec_by_tensor;  // this gateway's codec spec per tensor name
};

class PolicyTable {
 public:
  /// Keeps `policy` if it is newer than every version held; false (and nothing kept) otherwise.
  bool add(CodecPolicy policy);
  /// The newest version in effect at `step`, or nullptr: the configured codecs apply.
  const CodecPolicy* in_effect(uint64_t step) const;
  /// The newest version received (0: none).
  uint32_t latest_version() const;

 private:
  // The last kKept versions, oldest first. A tensor whose step lags behind more than kKept
  // versions runs under the oldest one kept (every gateway drops the same versions, so they
  // still agree).
  static constexpr size_t kKept = 16;
  std::deque<CodecPolicy> versions_;
};

}  // namespace gradgate::gateway
