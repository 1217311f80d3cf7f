// Two in-process gateways of one job over in-process transports (MemoryTransport). Local worker 0
// of each joins with one buffer per tensor: a step all-reduces both buffers through the real core
// and collective. A job of more local workers per gateway leaves the others to the test.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gateway/core/gateway.h"
#include "gateway/startup/component_options.h"
#include "gateway/transport/memory/memory_transport.h"
#include "outcome.h"

namespace gradgate::gateway::testing {

inline constexpr size_t kElements = 50000;
inline const TensorSpec kSpec{"layer.weight", kElements, Dtype::kFp32, 0, 0, 0.0};

// One gateway with its transport and its single local worker's buffers, one per tensor.
struct Node {
  std::unique_ptr<MemoryTransport> transport;
  std::unique_ptr<Gateway> gateway;
  std::vector<std::vector<float>> buffers;
  std::vector<uint32_t> keys;
};

// Tensor `t` of the job: kSpec, then others of its size under other names.
inline TensorSpec tensor_spec(size_t t) {
  TensorSpec spec = kSpec;
  if (t > 0) spec.name = "layer" + std::to_string(t) + ".weight";
  return spec;
}

// Two gateways of one job with `tensors` tensors, codec `codec` unless a policy says
// otherwise, and `local_workers` workers per gateway.
class TwoGateways {
 public:
  // `configure` may change the gateways' configuration further.
  explicit TwoGateways(const std::string& codec = "none", size_t tensors = 1,
                       uint32_t local_workers = 1,
                       const std::function<void(GatewayConfig&)>& configure = {}) {
    GatewayConfig config;
    config.nodes = {{"127.0.0.1", 0}, {"127.0.0.1", 0}};
    config.local_workers = local_workers;
    config.codec = codec;
    config.min_compress_elements = 16;
    config.timeout = std::chrono::milliseconds(5000);
    if (configure) configure(config);
    for (uint32_t rank = 0; rank < 2; ++rank) {
      config.node_rank = rank;
      nodes_[rank].transport = std::make_unique<MemoryTransport>(fabric_, rank);
      nodes_[rank].gateway =
          std::make_unique<Gateway>(core_options(config), *nodes_[rank].transport);
      EXPECT_TRUE(nodes_[rank].gateway->start().ok());
    }
    for (uint32_t rank = 0; rank < 2; ++rank) {
      Node& node = nodes_[rank];
      EXPECT_TRUE(node.gateway->on_worker_joined(0).ok());
      node.buffers.assign(tensors, std::vector<float>(kElements));
      for (size_t t = 0; t < tensors; ++t) {
        auto key = node.gateway->on_declare(0, tensor_spec(t), buffer_of(node.buffers[t]));
        EXPECT_TRUE(key.ok()) << key.status().to_string();
        node.keys.push_back(key.ok() ? *key : 0);
      }
    }
  }
  ~TwoGateways() {
    for (Node& node : nodes_) node.gateway->stop();
  }

  Gateway& gateway(uint32_t rank) { return *nodes_[rank].gateway; }
  MemoryTransport& transport(uint32_t rank) { return *nodes_[rank].transport; }
  uint32_t key(uint32_t rank, size_t tensor = 0) const { return nodes_[rank].keys[tensor]; }

  // One step of tensor `tensor`: each gateway's worker all-reduces `inputs[rank]`; returns both
  // outcomes and leaves the results in result(rank, tensor).
  std::array<AllreduceOutcome, 2> step(const std::array<std::vector<float>, 2>& inputs,
                                       size_t tensor = 0) {
    std::mutex mutex;
    std::condition_variable done;
    std::array<std::optional<AllreduceOutcome>, 2> outcomes;
    for (uint32_t rank = 0; rank < 2; ++rank) {
      nodes_[rank].buffers[tensor] = inputs[rank];  // the same size: the same storage
      nodes_[rank].gateway->on_allreduce(0, nodes_[rank].keys[tensor],
                                         [&, rank](AllreduceOutcome outcome) {
                                           std::lock_guard lock(mutex);
                                           outcomes[rank] = std::move(outcome);
                                           done.notify_all();
                                         });
    }
    std::unique_lock lock(mutex);
    const bool finished = done.wait_for(lock, std::chrono::seconds(20), [&] {
      return outcomes[0].has_value() && outcomes[1].has_value();
    });
    EXPECT_TRUE(finished);
    if (!finished) return {};
    return {*outcomes[0], *outcomes[1]};
  }
  const std::vector<float>& result(uint32_t rank, size_t tensor = 0) const {
    return nodes_[rank].buffers[tensor];
  }
  // Local worker 0's buffer of `tensor` on gateway `rank`.
  std::vector<float>& buffer(uint32_t rank, size_t tensor = 0) {
    return nodes_[rank].buffers[tensor];
  }

 private:
  MemoryFabric fabric_{2};  // outlives the transports
  std::array<Node, 2> nodes_;
};

inline std::array<std::vector<float>, 2> random_inputs(std::mt19937& random) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::array<std::vector<float>, 2> inputs{std::vector<float>(kElements),
                                           std::vector<float>(kElements)};
  for (auto& input : inputs) {
    for (float& v : input) v = normal(random);
  }
  return inputs;
}

}  // namespace gradgate::gateway::testing
