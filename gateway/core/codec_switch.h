// A tensor follows the control plane's policies: at the step the agreement says
// (gateway/agreement/switch_agreement.h: every gateway switches at the same step), it gets the
// policy's codec, new streams, and its old streams' residuals folded into the step's data, so
// error feedback loses nothing. Not thread-safe: the step runner guards it.
#pragma once

#include <cstdint>
#include <string>

#include "gateway/agreement/switch_agreement.h"
#include "gateway/collective/collective_engine.h"
#include "gateway/collective/mailbox.h"
#include "gateway/core/tensor_table.h"

namespace gradgate::gateway {

class CodecSwitch {
 public:
  CodecSwitch(TensorCodecs& codecs, TensorTable& table, const Mailbox& mailbox)
      : codecs_(codecs), table_(table), mailbox_(mailbox) {}

  /// Takes a policy from the control plane. kInvalidArgument for a codec spec that does not
  /// parse; an old version is ignored (ok).
  Status add_policy(CodecPolicy policy);
  /// Puts `tensor` under the policy its step `step` runs under, before that step runs, its old
  /// residuals folded into the step's data (`in_place`: Tensor::in_place).
  Status follow(Tensor& tensor, uint64_t step, const WorkerBuffer& in_place);
  /// The tensor's step ended as `report` says; `later_failed`: a later step already failed here
  /// meanwhile (LocalBarrier::skip_step). Only after a step that succeeded everywhere do the
  /// gateways agree on what every one held.
  static void step_ended(Tensor& tensor, const Result<AllreduceReport>& report, bool later_failed);
  /// The tensor's next step fails without running: as the peers that fail it, this gateway
  /// forgets what every gateway held (a step running meanwhile forgets it as it ends).
  static void step_failed(Tensor& tensor);

  /// The stamp of the tensor's next operation, for the envelopes of its messages.
  SwitchStamp stamp(const Tensor& tensor) const { return agreement_.stamp(tensor.policy); }
  /// The newest version received (0: none), and the newest a step ran under.
  uint32_t received_version() const { return agreement_.received_version(); }
  uint32_t applied_version() const { return agreement_.applied_version(); }

 private:
  /// Switches `tensor` to `placed`'s codec: new streams, residuals folded, data moved to where
  /// the new codec runs.
  Status switch_codec(Tensor& tensor, Placement placed, uint64_t step, uint32_t version,
                      const WorkerBuffer& in_place);
  /// compression.collective cannot run the codec that policy `version` names for `tensor`
  /// (`why`: a ring and a codec that does not sum). compression.collective is the same on every
  /// gateway of a job, so each keeps the codec it has: logged, the tensor marked off_policy, the
  /// version taken as applied. No step fails for it.
  void keep_codec(Tensor& tensor, uint32_t version, const std::string& wanted, const Status& why);

  TensorCodecs& codecs_;
  TensorTable& table_;
  const Mailbox& mailbox_;
  SwitchAgreement agreement_;
};

}  // namespace gradgate::gateway
