#include "gateway/config/config_keys.h"

#include <chrono>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/config/value_text.h"
#include "common/http/connection_limit.h"
#include "gateway/config/config_text.h"
#include "gradgate/base/job_limits.h"

namespace gradgate::gateway {
namespace {

constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMaxMilliseconds = 24 * 60 * 60 * 1000;  // one day: no deadline is longer
constexpr uint64_t kMaxIdleSleepUs = 10000;  // beyond 10 ms a polling thread is not polling

// Stores an unsigned key: `config.*Field = parsed` with the given bound.
template <auto Field, uint64_t Max>
Status store_unsigned(GatewayConfig& config, std::string_view text) {
  auto value = config::parse_unsigned(text, Max);
  if (!value.ok()) return value.status();
  config.*Field = static_cast<std::remove_reference_t<decltype(config.*Field)>>(*value);
  return {};
}

// Stores a key whose text `Parse` reads: `config.*Field = Parse(text)`.
template <auto Field, auto Parse>
Status store_parsed(GatewayConfig& config, std::string_view text) {
  auto value = Parse(text);
  if (!value.ok()) return value.status();
  config.*Field = *std::move(value);
  return {};
}

template <auto Field>
Status store_milliseconds(GatewayConfig& config, std::string_view text) {
  auto value = config::parse_unsigned(text, kMaxMilliseconds);
  if (!value.ok()) return value.status();
  config.*Field = std::chrono::milliseconds(static_cast<int64_t>(*value));
  return {};
}

template <auto Field>
Status store_string(GatewayConfig& config, std::string_view text) {
  config.*Field = std::string(text);
  return {};
}

Status store_node(GatewayConfig& config, std::string_view text) {
  auto node = config::parse_endpoint(text);
  if (!node.ok()) return node.status();
  config.nodes.push_back(*std::move(node));
  return {};
}

void clear_nodes(GatewayConfig& config) { config.nodes.clear(); }

// host:port, or "" for none.
template <auto Field>
Status store_optional_endpoint(GatewayConfig& config, std::string_view text) {
  if (text.empty()) {
    config.*Field = net::Endpoint{};
    return {};
  }
  return store_parsed<Field, config::parse_endpoint>(config, text);
}

// An unsigned rank, or "auto": the controller assigns it (node_rank_auto).
Status store_node_rank(GatewayConfig& config, std::string_view text) {
  config.node_rank_auto = text == "auto";
  if (config.node_rank_auto) {
    config.node_rank = 0;
    return {};
  }
  auto rank = config::parse_unsigned(text, kU32Max);
  if (!rank.ok()) {
    return Status(rank.status().code(),
                  rank.status().message() + " (or auto: from the controller)");
  }
  config.node_rank = static_cast<uint32_t>(*rank);
  return {};
}

Status store_eal_arg(GatewayConfig& config, std::string_view text) {
  config.dpdk_eal_args.emplace_back(text);
  return {};
}

void clear_eal_args(GatewayConfig& config) { config.dpdk_eal_args.clear(); }

using C = GatewayConfig;

constexpr ConfigKey kKeys[] = {
    {"job.id", false, store_unsigned<&C::job_id, kU64Max>, nullptr},
    {"job.nodes", true, store_node, clear_nodes},
    {"job.node_rank", false, store_node_rank, nullptr},
    {"job.node_name", false, store_string<&C::node_name>, nullptr},
    {"job.size", false, store_unsigned<&C::size, kMaxJobNodes>, nullptr},
    {"job.local_workers", false, store_unsigned<&C::local_workers, kU32Max>, nullptr},
    {"job.transport", false, store_parsed<&C::transport, parse_transport_kind>, nullptr},
    {"ingress.socket", false, store_string<&C::socket_path>, nullptr},
    {"compression.codec", false, store_string<&C::codec>, nullptr},
    {"compression.collective", false, store_parsed<&C::collective, parse_collective_mode>, nullptr},
    {"compression.placement", false, store_parsed<&C::placement, parse_placement_mode>, nullptr},
    {"compression.min_compress_elements", false, store_unsigned<&C::min_compress_elements, kU64Max>,
     nullptr},
    {"transport.listen", false, store_parsed<&C::listen, config::parse_endpoint>, nullptr},
    {"transport.connect_timeout_ms", false, store_milliseconds<&C::connect_timeout>, nullptr},
    {"transport.reconnect_min_ms", false, store_milliseconds<&C::reconnect_min>, nullptr},
    {"transport.reconnect_max_ms", false, store_milliseconds<&C::reconnect_max>, nullptr},
    {"transport.send_queue_bytes", false, store_unsigned<&C::send_queue_bytes, kU64Max>, nullptr},
    {"transport.max_message_bytes", false, store_unsigned<&C::max_message_bytes, kU64Max>, nullptr},
    {"transport.probe_interval_ms", false, store_milliseconds<&C::probe_interval>, nullptr},
    {"transport.peer_timeout_ms", false, store_milliseconds<&C::peer_timeout>, nullptr},
    {"dpdk.cores", false, store_string<&C::dpdk_cores>, nullptr},
    {"dpdk.memory_mb", false, store_unsigned<&C::dpdk_memory_mb, kU32Max>, nullptr},
    {"dpdk.no_huge", false, store_parsed<&C::dpdk_no_huge, config::parse_bool>, nullptr},
    {"dpdk.port", false, store_string<&C::dpdk_port>, nullptr},
    {"dpdk.mtu", false, store_unsigned<&C::dpdk_mtu, kU32Max>, nullptr},
    {"dpdk.mbufs", false, store_unsigned<&C::dpdk_mbufs, kU32Max>, nullptr},
    {"dpdk.udp_port", false, store_unsigned<&C::dpdk_udp_port, 65535>, nullptr},
    {"dpdk.eal_args", true, store_eal_arg, clear_eal_args},
    {"dpdk.idle_sleep_us", false, store_unsigned<&C::dpdk_idle_sleep_us, kMaxIdleSleepUs>, nullptr},
    {"dpdk.network_status_file", false, store_string<&C::dpdk_network_status_file>, nullptr},
    {"dpdk.network", false, store_string<&C::dpdk_network>, nullptr},
    {"dpdk.network_wait_ms", false, store_milliseconds<&C::dpdk_network_wait>, nullptr},
    {"dpdk.inject_drop", false, store_parsed<&C::dpdk_inject_drop, config::parse_fraction>,
     nullptr},
    {"dpdk.inject_duplicate", false,
     store_parsed<&C::dpdk_inject_duplicate, config::parse_fraction>, nullptr},
    {"dpdk.inject_reorder", false, store_parsed<&C::dpdk_inject_reorder, config::parse_fraction>,
     nullptr},
    {"dpdk.inject_seed", false, store_unsigned<&C::dpdk_inject_seed, kU64Max>, nullptr},
    {"admin.listen", false, store_parsed<&C::admin_listen, config::parse_endpoint>, nullptr},
    {"admin.max_connections", false,
     store_unsigned<&C::admin_max_connections, http::kMaxConnectionsLimit>, nullptr},
    {"control.url", false, store_optional_endpoint<&C::controller>, nullptr},
    {"control.token_file", false, store_string<&C::control_token_file>, nullptr},
    {"control.token_env", false, store_string<&C::control_token_env>, nullptr},
    {"control.report_interval_ms", false, store_milliseconds<&C::control_report_interval>, nullptr},
    {"control.poll_wait_ms", false, store_milliseconds<&C::control_poll_wait>, nullptr},
    {"control.request_timeout_ms", false, store_milliseconds<&C::control_request_timeout>, nullptr},
    {"control.join_timeout_ms", false, store_milliseconds<&C::control_join_timeout>, nullptr},
    {"collective.timeout_ms", false, store_milliseconds<&C::timeout>, nullptr},
    {"collective.segment_bytes", false, store_unsigned<&C::segment_bytes, kU64Max>, nullptr},
    {"streams.residual_memory_cap_bytes", false,
     store_unsigned<&C::residual_memory_cap_bytes, kU64Max>, nullptr},
    {"logging.level", false, store_string<&C::log_level>, nullptr},
    {"logging.format", false, store_string<&C::log_format>, nullptr},
};

}  // namespace

std::span<const ConfigKey> config_keys() { return kKeys; }

}  // namespace gradgate::gateway
