// Fault injection that makes a good link lossy: decides, for each outgoing datagram, whether it is
// sent, dropped, sent twice or held back to leave after the next one (reordered). Off by
// default; the tests of the DPDK transport turn it on to show that the reliability layer delivers
// every message exactly once anyway.
//
// Deterministic for a seed (SplitMix64). Not thread-safe: the polling thread owns it.
#pragma once

#include <cstdint>

#include "gradgate/base/status.h"

namespace gradgate::gateway::dpdk {

/// Fractions of outgoing datagrams, each in [0, 1); all 0: no impairment.
struct Impairments {
  double drop = 0.0;
  double duplicate = 0.0;
  double reorder = 0.0;
  uint64_t seed = 1;

  bool any() const { return drop > 0.0 || duplicate > 0.0 || reorder > 0.0; }
};

/// kInvalidArgument when a fraction is outside [0, 1) or they add up to 1 or more.
Status check(const Impairments& impairments);

class Impairer {
 public:
  enum class Fate { kSend, kDrop, kDuplicate, kHold };

  explicit Impairer(const Impairments& impairments)
      : impairments_(impairments), state_(impairments.seed) {}

  /// The fate of the next datagram.
  Fate next();

 private:
  double uniform();

  Impairments impairments_;
  uint64_t state_;
};

}  // namespace gradgate::gateway::dpdk
