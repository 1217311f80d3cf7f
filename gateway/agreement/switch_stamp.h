// The codec-switch agreement's part of every message between gateways: one stamp that the
// collective carries in its envelope without knowing the rule it serves (switch_agreement.h:
// every gateway switches a tensor's codec at the same step). The collective asks whether two
// stamps run alike, merges the stamps it hears and makes the one its aborts carry; it reads the
// version only to check a frame's header against it and to name it in messages.
//
// Layout (little-endian, 12 bytes): 0 u32 policy version, 4 u32 oldest, 8 u32 newest held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace gradgate::gateway {

/// The control plane's policy versions that a gateway holds: every version in [oldest, newest]
/// (its newest and those just before it, without a gap; {0, 0} before the first).
struct HeldPolicies {
  uint32_t oldest = 0;
  uint32_t newest = 0;
  /// The versions both hold (empty when oldest > newest).
  HeldPolicies common_with(const HeldPolicies& other) const {
    return {oldest > other.oldest ? oldest : other.oldest,
            newest < other.newest ? newest : other.newest};
  }
  bool operator==(const HeldPolicies&) const = default;
};

struct SwitchStamp {
  static constexpr size_t kBytes = 12;

  /// The version the sender runs the operation under; in an abort, the newest one it knows a
  /// gateway of the job runs the tensor under.
  uint32_t version = 0;
  /// The versions the sender and every gateway it heard from in this operation hold: at the end
  /// of a step that succeeded, what every gateway of the job holds.
  HeldPolicies held{};

  /// Messages of stamps that run alike belong to the same step of the same policy; others never
  /// will (their senders switched codecs at another step).
  bool runs_alike(const SwitchStamp& other) const { return version == other.version; }
  /// This stamp after hearing a message stamped `other`.
  SwitchStamp heard(const SwitchStamp& other) const {
    return {version, held.common_with(other.held)};
  }
  /// The stamp of an abort by a gateway that runs `own` and has seen peers run up to
  /// `newest_of_peers` (PeerVersions::newest): the newer of the two, so that a gateway a version
  /// behind catches up even if that peer's own messages never reach it (in a ring a gateway
  /// hears only from its left neighbour).
  static SwitchStamp of_abort(uint32_t own, uint32_t newest_of_peers) {
    return {own > newest_of_peers ? own : newest_of_peers, {}};
  }

  void write(std::span<std::byte, kBytes> out) const;
  static SwitchStamp read(std::span<const std::byte, kBytes> in);
  bool operator==(const SwitchStamp&) const = default;
};

}  // namespace gradgate::gateway
