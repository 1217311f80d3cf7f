// Shared builders for the policy tests: a job's measurements, settings, and reading a decision.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "control/policy/policy.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::control::testing {

inline constexpr double kGigabitPerSecond = 125e6;  // bytes per second

/// A job of `nodes` gateways, every link measured at `goodput` bytes/s (none when it is 0), with a
/// large convolution, a fully connected layer and a bias.
inline Measurements job(uint32_t nodes, double goodput, uint64_t step = 100) {
  Measurements m;
  m.step = step;
  m.nodes = nodes;
  for (uint32_t node = 0; node < nodes; ++node) {
    m.node_samples.push_back({.node = node, .data_volume = 1.0});
    if (goodput > 0.0 && nodes > 1) {
      m.links.push_back({.from_node = node,
                         .to_node = (node + 1) % nodes,
                         .goodput_bytes_per_second = goodput,
                         .rtt_seconds = 1e-4});
    }
  }
  m.tensors = {{.name = "conv.weight", .elements = 4u << 20, .rows = 0, .cols = 0},
               {.name = "fc.weight", .elements = 1u << 20, .rows = 0, .cols = 0},
               {.name = "fc.bias", .elements = 100, .rows = 0, .cols = 0}};
  // Fast enough that compression pays on a 1 Gb/s link.
  m.codec_speeds = {
      {.codec = "fp16", .encode_bytes_per_second = 10e9, .decode_bytes_per_second = 10e9},
      {.codec = "topk", .encode_bytes_per_second = 5e9, .decode_bytes_per_second = 20e9}};
  return m;
}

inline PolicySettings settings(const std::string& name) {
  PolicySettings s;
  s.name = name;
  s.min_compress_elements = 1024;
  return s;
}

inline std::unique_ptr<Policy> make(const PolicySettings& s) {
  auto policy = make_policy(s);
  EXPECT_TRUE(policy.ok()) << policy.status().to_string();
  return policy.ok() ? std::move(policy).value() : nullptr;
}

inline PolicyDecision decide(const PolicySettings& s, const Measurements& m) {
  auto policy = make(s);
  if (!policy) return {};
  auto decision = policy->decide(m);
  EXPECT_TRUE(decision.ok()) << decision.status().to_string();
  return decision.ok() ? std::move(decision).value() : PolicyDecision{};
}

/// The canonical form of a spec, as decisions print it.
inline std::string canonical(const std::string& spec) {
  auto params = kernels::parse_codec_spec(spec);
  EXPECT_TRUE(params.ok()) << spec;
  return params.ok() ? kernels::format_codec_spec(*params) : std::string();
}

inline double density_of(const std::string& spec) {
  auto params = kernels::parse_codec_spec(spec);
  EXPECT_TRUE(params.ok()) << spec;
  return params.ok() ? params->density : 0.0;
}

inline const TensorDecision& tensor(const PolicyDecision& decision, const std::string& name) {
  for (const TensorDecision& t : decision.tensors) {
    if (t.tensor == name) return t;
  }
  ADD_FAILURE() << "no decision for " << name;
  static const TensorDecision missing;
  return missing;
}

/// The codec of `name` when every node uses the same one (a test failure otherwise).
inline std::string uniform_codec(const PolicyDecision& decision, const std::string& name) {
  const TensorDecision& t = tensor(decision, name);
  if (t.codec_per_node.empty()) {
    ADD_FAILURE() << "no codecs for " << name;
    return {};
  }
  for (const std::string& codec : t.codec_per_node) EXPECT_EQ(codec, t.codec_per_node.front());
  return t.codec_per_node.front();
}

}  // namespace gradgate::control::testing
