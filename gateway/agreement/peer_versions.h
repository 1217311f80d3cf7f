// The newest policy version peers ran each tensor under, as the stamps of their messages say.
// After a step that succeeded on a peer but failed here, right where they switched policy, the
// peer runs a newer version than this gateway: this tells the gateway to catch up
// (SwitchAgreement::due). An abort's stamp names the newest its sender knows of. Not
// thread-safe: the mailbox that notes the stamps guards it.
#pragma once

#include <cstdint>
#include <map>

#include "gateway/agreement/switch_stamp.h"

namespace gradgate::gateway {

class PeerVersions {
 public:
  /// A message of tensor `tensor_id` stamped `stamp` was accepted.
  void note(uint32_t tensor_id, const SwitchStamp& stamp);
  /// The newest version noted for the tensor (0: none).
  uint32_t newest(uint32_t tensor_id) const;
  /// The tensor is gone.
  void forget(uint32_t tensor_id) { newest_.erase(tensor_id); }

 private:
  std::map<uint32_t, uint32_t> newest_;
};

}  // namespace gradgate::gateway
