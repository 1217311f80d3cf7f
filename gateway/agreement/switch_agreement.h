// Every gateway switches a tensor's codec at the same step: the rule, in one place.
//
// Every gateway of a job receives the same policy versions from the control plane, though not at
// the same moment: one may poll the controller late on a loaded machine. A tensor switches to
// version v at a step at or past v's `effective_step` only once every gateway holds v, as the
// tensor's previous step showed: each message of a step carries its sender's stamp
// (switch_stamp.h), which says the versions the sender and every gateway it heard from hold. All
// gateways see the same previous step, so all of them switch at the same step boundary and none
// fails a step for a policy it received late. Messages and frames of another version are refused.
// A tensor the policy does not name, or any tensor before the first policy, runs with the
// configured codec. Should a step succeed on one gateway and fail on another right there, their
// next steps may differ by a version; the one behind catches up once it sees the newer version in
// the others' messages (peer_versions.h), at worst after one more failed step.
//
// What switching does to a tensor (new streams, residuals folded into the step's data, data moved
// to where the new codec runs) is the core's (gateway/core/codec_switch.h). Not thread-safe: the
// step runner guards it.
#pragma once

#include <cstdint>
#include <optional>

#include "gateway/agreement/policy_table.h"
#include "gateway/agreement/switch_stamp.h"

namespace gradgate::gateway {

/// Which policy a tensor runs under, and what the agreement knows of its last step.
struct TensorAgreement {
  uint32_t version = 0;  // the version its streams were made for
  /// It keeps a codec other than its policy's, which compression.collective cannot run.
  bool off_policy = false;
  /// The policy versions every gateway held in the tensor's last step; none before the first
  /// and after a failed one (the gateways may disagree on what they saw).
  std::optional<HeldPolicies> held_by_all;
};

class SwitchAgreement {
 public:
  /// Keeps `policy` if it is newer than every version held; false (and nothing kept) otherwise.
  /// `floor`: the oldest version a tensor runs under (a tensor never goes back to an older one).
  bool add(CodecPolicy policy, uint32_t floor);
  /// The policy `tensor`'s step `step` runs under if newer than the tensor's, else nullptr.
  /// `newest_of_peers`: the newest version a peer ran the tensor under (PeerVersions::newest).
  const CodecPolicy* due(const TensorAgreement& tensor, uint64_t step,
                         uint32_t newest_of_peers) const;
  /// The tensor runs under `version` from now: with the policy's codec, or (`off_policy`) with
  /// its own, which is what every gateway of the same compression.collective does.
  void applied(TensorAgreement& tensor, uint32_t version, bool off_policy);
  /// The stamp the tensor's next operation starts with.
  SwitchStamp stamp(const TensorAgreement& tensor) const { return {tensor.version, table_.held()}; }
  /// The tensor's step ended; `final_stamp`: this gateway's stamp after hearing every message of
  /// it, or nullopt when it failed here or a later step already failed here meanwhile. Only
  /// after a step that succeeded everywhere do the gateways agree on what every one held.
  static void step_ended(TensorAgreement& tensor, const std::optional<SwitchStamp>& final_stamp);
  /// The tensor's next step fails without running: as the peers that fail it, this gateway
  /// forgets what every gateway held, unless a step still runs (which forgets it as it ends).
  static void step_failed(TensorAgreement& tensor, bool step_running);

  /// The newest version received (0: none), and the newest a step ran under.
  uint32_t received_version() const { return received_; }
  uint32_t applied_version() const { return applied_; }

 private:
  PolicyTable table_;
  uint32_t received_ = 0, applied_ = 0;
};

}  // namespace gradgate::gateway
