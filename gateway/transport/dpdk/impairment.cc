#include "gateway/transport/dpdk/impairment.h"

#include <string>

namespace gradgate::gateway::dpdk {

Status check(const Impairments& impairments) {
  for (const double fraction : {impairments.drop, impairments.duplicate, impairments.reorder}) {
    if (!(fraction >= 0.0 && fraction < 1.0)) {
      return Status(
          ErrorCode::kInvalidArgument,
          "impairments: every fraction must be in [0, 1), got " + std::to_string(fraction));
    }
  }
  if (impairments.drop + impairments.duplicate + impairments.reorder >= 1.0) {
    return Status(ErrorCode::kInvalidArgument, "impairments: the fractions add up to 1 or more");
  }
  return {};
}

double Impairer::uniform() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

Impairer::Fate Impairer::next() {
  if (!impairments_.any()) return Fate::kSend;
  double draw = uniform();
  if (draw < impairments_.drop) return Fate::kDrop;
  draw -= impairments_.drop;
  if (draw < impairments_.duplicate) return Fate::kDuplicate;
  draw -= impairments_.duplicate;
  if (draw < impairments_.reorder) return Fate::kHold;
  return Fate::kSend;
}

}  // namespace gradgate::gateway::dpdk
