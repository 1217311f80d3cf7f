#include "gateway/config/config_text.h"

#include <array>
#include <string>
#include <utility>

#include "common/config/value_text.h"

namespace gradgate::gateway {
namespace {

using config::quoted;

Status invalid(std::string message) {
  return Status(ErrorCode::kInvalidArgument, std::move(message));
}

constexpr std::array<std::pair<CollectiveMode, std::string_view>, 4> kCollectiveModes{{
    {CollectiveMode::kAuto, "auto"},
    {CollectiveMode::kRing, "ring"},
    {CollectiveMode::kAllGather, "allgather"},
    {CollectiveMode::kAggregator, "aggregator"},
}};

}  // namespace

Result<CollectiveMode> parse_collective_mode(std::string_view text) {
  for (const auto& [mode, name] : kCollectiveModes) {
    if (text == name) return mode;
  }
  return invalid(quoted(text) + " is not one of auto, ring, allgather, aggregator");
}

std::string_view collective_mode_name(CollectiveMode mode) {
  for (const auto& [known, name] : kCollectiveModes) {
    if (known == mode) return name;
  }
  return "unknown";
}

Result<PlacementMode> parse_placement_mode(std::string_view text) {
  if (text == "auto") return PlacementMode::kAuto;
  if (text == "gpu") return PlacementMode::kGpu;
  if (text == "cpu") return PlacementMode::kCpu;
  return invalid(quoted(text) + " is not one of auto, gpu, cpu");
}

Result<TransportKind> parse_transport_kind(std::string_view text) {
  if (text == "tcp") return TransportKind::kTcp;
  if (text == "dpdk") return TransportKind::kDpdk;
  return invalid(quoted(text) + " is not one of tcp, dpdk");
}

std::string_view transport_kind_name(TransportKind kind) {
  return kind == TransportKind::kDpdk ? "dpdk" : "tcp";
}

}  // namespace gradgate::gateway
