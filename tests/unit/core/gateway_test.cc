// The gateway core driven as the ingress drives it, in process: which worker gets which step.
#include "gateway/core/gateway.h"
#include "gateway/startup/component_options.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>

#include "gateway/transport/tcp_transport.h"
#include "outcome.h"
#include "scoped_limit.h"

namespace gradgate::gateway {
namespace {

using testing::buffer_of;
using testing::expect_success;
using testing::Outcome;

GatewayConfig two_node_config() {
  GatewayConfig config;
  config.nodes = {{"127.0.0.1", 0}, {"127.0.0.1", 0}};  // gateway 1 never comes
  config.local_workers = 2;
  config.codec = "none";
  config.timeout = std::chrono::milliseconds(1000);
  return config;
}

// A gateway that is the whole job (codec none), with `local_workers` workers.
struct OneNodeJob {
  static GatewayConfig config_of(uint32_t local_workers) {
    GatewayConfig config;
    config.nodes = {{"127.0.0.1", 0}};
    config.local_workers = local_workers;
    config.codec = "none";
    return config;
  }
  static TcpTransportOptions options_of(const GatewayConfig& config) {
    TcpTransportOptions options;
    options.peers = config.nodes;
    options.listen = {"127.0.0.1", 0};
    return options;
  }

  explicit OneNodeJob(uint32_t local_workers)
      : config(config_of(local_workers)),
        transport(options_of(config)),
        gateway(core_options(config), transport) {}

  GatewayConfig config;
  TcpTransport transport;
  Gateway gateway;
};

TEST(GatewayCore, WorkerThatRejoinsMidStepIsNotGivenThatStepsResult) {
  const GatewayConfig config = two_node_config();
  TcpTransportOptions options;
  options.rank = 0;
  options.peers = config.nodes;
  options.listen = {"127.0.0.1", 0};
  TcpTransport transport(options);
  Gateway gateway(core_options(config), transport);
  ASSERT_TRUE(gateway.start().ok());

  std::vector<float> buffer0(2048, 1.0f), buffer1(2048, 2.0f), rejoined(2048, 5.0f);
  const TensorSpec spec{"w", 2048, Dtype::kFp32, 0, 0, 0.0};
  ASSERT_TRUE(gateway.on_worker_joined(0).ok());
  ASSERT_TRUE(gateway.on_worker_joined(1).ok());
  auto key = gateway.on_declare(0, spec, buffer_of(buffer0));
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(gateway.on_declare(1, spec, buffer_of(buffer1)).ok());
  Outcome first0, first1, second1;
  gateway.on_allreduce(0, *key, first0.callback());
  gateway.on_allreduce(1, *key, first1.callback());  // step 0 runs, waiting for gateway 1

  // While its connection is held, worker 1's rank is in use (a restarted worker may wait), and a
  // rank beyond the node's workers can never join.
  EXPECT_EQ(gateway.on_worker_joined(1).status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(gateway.on_worker_joined(2).status().code(), ErrorCode::kInvalidArgument);
  gateway.on_worker_left(1);  // worker 1 dies mid-step and comes back
  ASSERT_TRUE(gateway.on_worker_joined(1).ok());
  ASSERT_TRUE(gateway.on_declare(1, spec, buffer_of(rejoined)).ok());
  gateway.on_allreduce(1, *key, second1.callback());

  const auto step0 = first0.wait(std::chrono::seconds(20));
  ASSERT_TRUE(step0.has_value());
  EXPECT_FALSE(step0->status.ok());  // gateway 1 never came: timeout
  EXPECT_EQ(step0->step, 0u);
  // The rejoined worker's request belongs to the next step, not to the one that ran.
  const auto next = second1.wait(std::chrono::seconds(20));
  ASSERT_TRUE(next.has_value());
  EXPECT_FALSE(next->status.ok());
  EXPECT_EQ(next->step, 1u) << next->status.to_string();
  EXPECT_EQ(rejoined, std::vector<float>(2048, 5.0f)) << "step 0 wrote into the new buffer";
  gateway.stop();
}

// A worker that leaves between asking for a step and the step's gather takes its gradient along:
// the step fails instead of handing the other worker a node sum without it. The window is short
// (until the step's thread takes the gateway's lock), so the rounds race for it; a round that
// misses it checks the complete sum.
TEST(GatewayCore, AWorkerThatLeavesBeforeTheGatherFailsTheStepInsteadOfMissingFromTheSum) {
  OneNodeJob job(2);
  Gateway& gateway = job.gateway;
  ASSERT_TRUE(gateway.start().ok());
  const TensorSpec spec{"w", 1024, Dtype::kFp32, 0, 0, 0.0};
  std::vector<float> buffer0(1024), buffer1(1024);
  ASSERT_TRUE(gateway.on_worker_joined(0).ok());
  auto key = gateway.on_declare(0, spec, buffer_of(buffer0));
  ASSERT_TRUE(key.ok()) << key.status().to_string();
  int failed = 0;
  for (int round = 0; round < 200; ++round) {
    ASSERT_TRUE(gateway.on_worker_joined(1).ok());
    ASSERT_TRUE(gateway.on_declare(1, spec, buffer_of(buffer1)).ok());
    std::fill(buffer0.begin(), buffer0.end(), 1.0f);
    std::fill(buffer1.begin(), buffer1.end(), 2.0f);
    Outcome done0, done1;
    gateway.on_allreduce(0, *key, done0.callback());
    gateway.on_allreduce(1, *key, done1.callback());
    gateway.on_worker_left(1);
    const auto outcome = done0.wait(std::chrono::seconds(20));
    ASSERT_TRUE(outcome.has_value()) << "round " << round;
    if (!outcome->status.ok()) {
      EXPECT_EQ(outcome->status.code(), ErrorCode::kAborted) << outcome->status.to_string();
      ++failed;
      continue;
    }
    ASSERT_EQ(buffer0, std::vector<float>(1024, 3.0f))
        << "round " << round << ": a step without worker 1's gradient succeeded";
  }
  std::cout << failed << " of 200 rounds lost worker 1 before the gather\n";
  gateway.stop();
}

// A worker whose buffer moved (DDP reallocates its buckets) declares the tensor again: refused
// while its request is pending (the step would read one buffer and write another), and after
// that the next step reads and writes the new buffer, not the old one.
TEST(GatewayCore, ATensorDeclaredAgainMovesToItsNewBufferButNotMidStep) {
  OneNodeJob job(2);
  Gateway& gateway = job.gateway;
  ASSERT_TRUE(gateway.start().ok());
  const TensorSpec spec{"w", 1024, Dtype::kFp32, 0, 0, 0.0};
  std::vector<float> buffer0(1024, 1.0f), old1(1024, 2.0f), new1(1024, 5.0f);
  ASSERT_TRUE(gateway.on_worker_joined(0).ok());
  ASSERT_TRUE(gateway.on_worker_joined(1).ok());
  auto key = gateway.on_declare(0, spec, buffer_of(buffer0));
  ASSERT_TRUE(key.ok()) << key.status().to_string();
  ASSERT_TRUE(gateway.on_declare(1, spec, buffer_of(old1)).ok());

  Outcome done0, done1;
  gateway.on_allreduce(1, *key, done1.callback());
  const auto refused = gateway.on_declare(1, spec, buffer_of(new1));
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("while its all-reduce runs"), std::string::npos)
      << refused.status().to_string();
  gateway.on_allreduce(0, *key, done0.callback());
  for (Outcome* done : {&done0, &done1}) ASSERT_NO_FATAL_FAILURE(expect_success(*done));
  EXPECT_EQ(old1, std::vector<float>(1024, 3.0f));

  const auto moved = gateway.on_declare(1, spec, buffer_of(new1));
  ASSERT_TRUE(moved.ok()) << moved.status().to_string();
  EXPECT_EQ(*moved, *key);
  Outcome again0, again1;
  gateway.on_allreduce(0, *key, again0.callback());
  gateway.on_allreduce(1, *key, again1.callback());
  for (Outcome* done : {&again0, &again1}) ASSERT_NO_FATAL_FAILURE(expect_success(*done));
  EXPECT_EQ(buffer0, std::vector<float>(1024, 8.0f));  // 3 + 5
  EXPECT_EQ(new1, std::vector<float>(1024, 8.0f));
  EXPECT_EQ(old1, std::vector<float>(1024, 3.0f)) << "the old buffer was written";
  gateway.stop();
}

// The address-space limit that lets the process map only `headroom` bytes more than it has now.
rlim_t address_space_with(uint64_t headroom) {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) + headroom;
}

// The memory cap may allow more than the machine has: a tensor whose node sum cannot be
// allocated is refused with a reason, and the gateway serves on. The machine's limit is played by
// an address-space limit just above what the process uses.
TEST(GatewayCore, ATensorBeyondTheMachinesMemoryIsRefusedAndTheGatewayServesOn) {
  if (gradgate::testing::kSanitizerRuntime) {
    GTEST_SKIP() << "an address-space limit leaves the sanitizers no room for their shadow memory";
  }
  OneNodeJob job(2);  // two local workers: the node sum is a buffer of its own
  Gateway& gateway = job.gateway;
  ASSERT_TRUE(gateway.start().ok());
  ASSERT_TRUE(gateway.on_worker_joined(0).ok());
  std::vector<float> small(1024, 1.0f);
  constexpr uint64_t kHuge = uint64_t{1} << 30;  // 4 GiB of node sum
  // The gateway reads no buffer as it declares: a small one stands for the huge one.
  const WorkerBuffer stand_in{reinterpret_cast<std::byte*>(small.data()), kHuge * 4, {}};
  Result<uint32_t> refused = Status(ErrorCode::kInternal, "not declared");
  {
    gradgate::testing::ScopedLimit limit(RLIMIT_AS, address_space_with(uint64_t{256} << 20));
    refused = gateway.on_declare(0, {"huge", kHuge, Dtype::kFp32, 0, 0, 0.0}, stand_in);
  }
  EXPECT_EQ(refused.status().code(), ErrorCode::kResourceExhausted) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("out of memory"), std::string::npos);
  EXPECT_EQ(gateway.stats().tensors, 0u);
  EXPECT_EQ(gateway.stats().residual_bytes, 0u);
  const auto served = gateway.on_declare(0, {"w", 1024, Dtype::kFp32, 0, 0, 0.0}, buffer_of(small));
  EXPECT_TRUE(served.ok()) << served.status().to_string();
  gateway.stop();
}

// Steps run on threads that stay for the next step (what a CUDA codec builds per thread stays
// with them): 40 steps one after the other take a few threads (one more when a thread is not back
// from its last step yet), not one per step.
TEST(GatewayCore, StepsReuseTheirThreads) {
  OneNodeJob job(1);
  Gateway& gateway = job.gateway;
  ASSERT_TRUE(gateway.start().ok());
  ASSERT_TRUE(gateway.on_worker_joined(0).ok());
  std::vector<float> buffer(4096, 1.0f);
  const TensorSpec spec{"w", 4096, Dtype::kFp32, 0, 0, 0.0};
  auto key = gateway.on_declare(0, spec, buffer_of(buffer));
  ASSERT_TRUE(key.ok()) << key.status().to_string();
  for (uint64_t step = 0; step < 40; ++step) {
    Outcome done;
    gateway.on_allreduce(0, *key, done.callback());
    const auto outcome = done.wait(std::chrono::seconds(20));
    ASSERT_TRUE(outcome.has_value());
    ASSERT_TRUE(outcome->status.ok()) << outcome->status.to_string();
    EXPECT_EQ(outcome->step, step);
  }
  EXPECT_GE(gateway.stats().step_threads, 1u);
  EXPECT_LE(gateway.stats().step_threads, 20u);
  gateway.stop();
}

}  // namespace
}  // namespace gradgate::gateway
