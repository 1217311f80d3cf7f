// A link between two live gateways that breaks mid-step: its TCP connection reset (the sockets,
// not the processes), or blackholed for half the collective timeout and then reset, by a proxy in
// front of gateway 0. Every step succeeds on every worker, with results bit-identical to an
// undisturbed run of the same job, and the gateways say in their metrics what happened.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "job.h"
#include "tcp_proxy.h"
#include "transport_test_support.h"  // eventually

namespace gradgate::gateway::testing {
namespace {

using std::chrono::milliseconds;

constexpr uint32_t kCollectiveTimeoutMs = 8000;

struct Outcome {
  std::vector<float> results[2];  // by gateway: what its worker got, every step
  double reconnects = 0;          // gateway 1's gradgate_transport_reconnects_total
  double resent_bytes = 0;        // both gateways' gradgate_transport_resent_bytes_total
  double peers_down = 0;          // both gateways' gradgate_peers_down_total, every reason
};

double counter(const std::string& metrics, const std::string& series) {
  return std::max(0.0, sample(metrics, series));
}

double peers_down(const std::string& metrics) {
  double total = 0;
  for (const char* reason : {"restarted", "stopped", "silent", "refused", "protocol"}) {
    total += counter(metrics, std::string("gradgate_peers_down_total{reason=\"") + reason + "\"}");
  }
  return total;
}

// Two gateways (one worker each, `steps` steps of `tensors`), gateway 1 dialing gateway 0
// through a proxy; `disturb` runs beside the workers, and makes at least `reconnections`.
// Silent connections are redialed after 3 s, peers down after 6 s of nothing.
Outcome run_job(const std::string& codec, const std::vector<TensorArg>& tensors, int steps,
                const std::function<void(TcpProxy&)>& disturb, int reconnections = 0) {
  auto options = job_options(2, 1, codec, "auto", kCollectiveTimeoutMs);
  options.started = 1;
  options.settings = {"transport.peer_timeout_ms=6000"};
  bench::LocalJob job(options);
  TcpProxy proxy(job.port(0));
  job.dial_through(0, proxy.port());
  job.start_gateway(1);
  auto w0 = start_worker(job, 0, 0, tensors, steps, 3, job.dir() + "/r0");
  auto w1 = start_worker(job, 1, 0, tensors, steps, 3, job.dir() + "/r1");
  disturb(proxy);
  Outcome outcome;
  EXPECT_EQ(w0->wait_exit(milliseconds(120000)), 0) << w0->log();
  EXPECT_EQ(w1->wait_exit(milliseconds(120000)), 0) << w1->log();
  outcome.results[0] = read_floats(job.dir() + "/r0");
  outcome.results[1] = read_floats(job.dir() + "/r1");
  // The metrics are refreshed every report interval (1 s): read them until they show the
  // reconnections on both sides (a blackhole may still be lifting when the workers are done).
  std::string metrics[2];
  eventually(
      [&] {
        for (uint32_t rank = 0; rank < 2; ++rank) {
          metrics[rank] = get_body(job.admin_port(rank), "/metrics");
        }
        const double one = counter(metrics[1], "gradgate_transport_reconnects_total");
        return one >= reconnections &&
               one == counter(metrics[0], "gradgate_transport_reconnects_total");
      },
      milliseconds(10000));
  outcome.reconnects = counter(metrics[1], "gradgate_transport_reconnects_total");
  for (const auto& text : metrics) {
    outcome.resent_bytes += counter(text, "gradgate_transport_resent_bytes_total");
    outcome.peers_down += peers_down(text);
  }
  return outcome;
}

void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(LinkFaults, ConnectionsResetMidStepLeaveResultsBitIdentical) {
  // fp16 over the ring: 2 MiB frames, so a reset lands in the middle of one.
  const std::vector<TensorArg> tensors = {{"w", 1 << 20, "fp32"}};
  constexpr int kSteps = 30;
  const Outcome undisturbed = run_job("fp16", tensors, kSteps, [](TcpProxy&) {});
  constexpr int kResets = 3;
  const Outcome reset = run_job(
      "fp16", tensors, kSteps,
      [&](TcpProxy& proxy) {
        for (int done = 1; done <= kResets; ++done) {
          // About 12 MiB apart, so that every reset falls within the run (some 4 MiB a step both
          // ways), and off any frame boundary.
          proxy.reset_at(static_cast<uint64_t>(done) * (12u << 20) + 777777);
          ASSERT_TRUE(proxy.wait_for_connections(done + 1, milliseconds(60000)));
        }
      },
      kResets);
  for (int rank = 0; rank < 2; ++rank) {
    expect_bit_identical(reset.results[rank], undisturbed.results[rank]);
  }
  EXPECT_EQ(reset.reconnects, kResets);
  EXPECT_GT(reset.resent_bytes, 0) << "a reset mid-frame leaves bytes to write again";
  EXPECT_EQ(reset.peers_down, 0);
  EXPECT_EQ(undisturbed.reconnects, 0);
}

TEST(LinkFaults, ALinkBlackholedForHalfTheCollectiveTimeoutLeavesResultsBitIdentical) {
  // Top-k with error feedback: a message lost or delivered twice would change every later step.
  const std::vector<TensorArg> tensors = {{"w", 1 << 18, "fp32"}, {"b", 5000, "fp32"}};
  constexpr int kSteps = 20;
  const Outcome undisturbed = run_job("topk:density=0.05", tensors, kSteps, [](TcpProxy&) {});
  const Outcome blackholed = run_job(
      "topk:density=0.05", tensors, kSteps,
      [](TcpProxy& proxy) {
        ASSERT_TRUE(
            eventually([&] { return proxy.bytes_forwarded() >= (1u << 20); }, milliseconds(60000)));
        // Dark for half the collective timeout (the fault's length), and the connection does not
        // survive it (a middlebox that forgot the flow): the gateways wait (the proxy's kernel
        // acknowledges what fits its buffers), then reconnect and carry their sessions on.
        proxy.set_blackhole(true);
        std::this_thread::sleep_for(milliseconds(kCollectiveTimeoutMs / 2));
        proxy.reset_all();
        proxy.set_blackhole(false);
      },
      1);
  for (int rank = 0; rank < 2; ++rank) {
    expect_bit_identical(blackholed.results[rank], undisturbed.results[rank]);
  }
  EXPECT_GE(blackholed.reconnects, 1);
  EXPECT_EQ(blackholed.peers_down, 0);
}

}  // namespace
}  // namespace gradgate::gateway::testing
