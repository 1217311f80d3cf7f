// Bad days: a gateway killed or hung mid all-reduce, a worker killed mid call, a peer that sends
// garbage. Every waiting worker gets an error within the timeout, the daemons stay up, and the
// job works again afterwards. A gateway started with an option it cannot run with stops at once.

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "gateway/collective/envelope.h"
#include "job.h"
#include "transport_test_support.h"  // RawPeer: a gateway that misbehaves

namespace gradgate::gateway::testing {
namespace {

using Seconds = std::chrono::duration<double>;
using std::chrono::milliseconds;
constexpr int kPeerFailedExit = 10 + 5;  // gradgate_test_worker: 10 + GG_PEER_FAILED
const std::vector<TensorArg> kTensors = {{"w", 50000, "fp32"}};
// A new run of the job names its tensors anew (as the Python hook does with its run id), so that
// nothing of the failed run can mix into it.
const std::vector<TensorArg> kNextRunTensors = {{"w.run2", 50000, "fp32"}};

// An interval the signal wait cannot take (inf spun at full speed and ignored SIGTERM) is refused
// before the gateway starts, naming the option.
TEST(GatewayFaults, AStatsIntervalThatIsNoNumberOfSecondsIsRefusedAtStart) {
  for (const std::string interval : {"inf", "nan", "-1", "1e9"}) {
    const std::string log = ::testing::TempDir() + "gradgate-stats-interval-" +
                            std::to_string(getpid()) + "-" + interval + ".log";
    ChildProcess process(GRADGATE_BINARY, {"gateway", "--stats-interval", interval}, log);
    EXPECT_NE(process.wait_exit(milliseconds(10000)), 0) << interval;
    EXPECT_NE(process.log().find("--stats-interval: must be 0..86400 seconds, got " + interval),
              std::string::npos)
        << process.log();
    std::remove(log.c_str());
  }
}

TEST(GatewayFaults, KilledGatewayFailsTheOthersInTimeAndTheJobRecovers) {
  bench::LocalJob job(job_options(3, 1, "topk:density=0.01", "auto", 3000));
  // Gateway 2 has no worker: the all-reduce of gateways 0 and 1 waits on it when it dies.
  auto w0 = start_worker(job, 0, 0, kTensors, 1, 1, job.dir() + "/a0");
  auto w1 = start_worker(job, 1, 0, kTensors, 1, 1, job.dir() + "/a1");
  ASSERT_TRUE(wait_for_log(job.gateway(0), "local worker 0 joined", milliseconds(20000)));
  ASSERT_TRUE(wait_for_log(job.gateway(1), "local worker 0 joined", milliseconds(20000)));
  const auto killed = std::chrono::steady_clock::now();
  job.gateway(2).signal(SIGKILL);
  EXPECT_EQ(w0->wait_exit(milliseconds(20000)), kPeerFailedExit) << w0->log();
  EXPECT_EQ(w1->wait_exit(milliseconds(20000)), kPeerFailedExit) << w1->log();
  EXPECT_LT(Seconds(std::chrono::steady_clock::now() - killed).count(), 3.0 + 5.0);
  EXPECT_TRUE(job.gateway(0).running());
  EXPECT_TRUE(job.gateway(1).running());

  job.start_gateway(2);  // on its old port: the others reconnect
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (uint32_t rank = 0; rank < 3; ++rank) {
    workers.push_back(
        start_worker(job, rank, 0, kNextRunTensors, 3, 2, job.dir() + "/b" + std::to_string(rank)));
  }
  for (auto& worker : workers)
    EXPECT_EQ(worker->wait_exit(milliseconds(60000)), 0) << worker->log();
}

TEST(GatewayFaults, HungGatewayFailsTheOthersAtTheTimeout) {
  bench::LocalJob job(job_options(2, 1, "fp16", "auto", 1500));
  job.gateway(1).signal(SIGSTOP);
  auto worker = start_worker(job, 0, 0, kTensors, 1, 1, job.dir() + "/a0");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(worker->wait_exit(milliseconds(20000)), kPeerFailedExit) << worker->log();
  EXPECT_LT(Seconds(std::chrono::steady_clock::now() - start).count(), 1.5 + 5.0);
  job.gateway(1).signal(SIGCONT);
  EXPECT_TRUE(job.gateway(0).running());
}

TEST(GatewayFaults, MissingLocalWorkerFailsTheOthersAtTheTimeout) {
  bench::LocalJob job(job_options(1, 2, "none", "auto", 1000));
  auto lonely = start_worker(job, 0, 0, kTensors, 1, 1, job.dir() + "/a0");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(lonely->wait_exit(milliseconds(20000)), kPeerFailedExit) << lonely->log();
  EXPECT_LT(Seconds(std::chrono::steady_clock::now() - start).count(), 1.0 + 5.0);
  EXPECT_NE(lonely->log().find("only 1 of the 2 local workers"), std::string::npos)
      << lonely->log();
}

TEST(GatewayFaults, TensorOverTheResidualMemoryCapIsRefusedWithAClearError) {
  auto options = job_options(2, 1, "topk:density=0.01");
  options.residual_memory_cap_bytes = 100000;  // less than the 50000-element tensor's state
  bench::LocalJob job(options);
  auto worker = start_worker(job, 0, 0, kTensors, 1, 1, job.dir() + "/a0");
  EXPECT_EQ(worker->wait_exit(milliseconds(20000)), 10 + 7) << worker->log();  // RESOURCE_EXHAUSTED
  EXPECT_NE(worker->log().find("streams.residual_memory_cap_bytes"), std::string::npos)
      << worker->log();
  // Within the cap, the same gateways serve a smaller tensor.
  const std::vector<TensorArg> small = {{"small", 5000, "fp32"}};
  auto w0 = start_worker(job, 0, 0, small, 2, 1, job.dir() + "/b0");
  auto w1 = start_worker(job, 1, 0, small, 2, 1, job.dir() + "/b1");
  EXPECT_EQ(w0->wait_exit(milliseconds(20000)), 0) << w0->log();
  EXPECT_EQ(w1->wait_exit(milliseconds(20000)), 0) << w1->log();
}

TEST(GatewayFaults, KilledWorkerReleasesItsSessionAndTensors) {
  bench::LocalJob job(job_options(2, 1, "topk:density=0.01"));
  auto doomed =
      start_worker(job, 0, 0, kTensors, 1, 1, job.dir() + "/a0", {"--hang-after-allreduce"});
  ASSERT_TRUE(wait_for_log(*doomed, "started", milliseconds(20000))) << doomed->log();
  doomed->signal(SIGKILL);
  doomed->wait_exit(milliseconds(10000));
  ASSERT_TRUE(wait_for_log(job.gateway(0), "local worker 0 left", milliseconds(20000)));
  // The same local rank connects again, and the job runs from a clean state.
  auto w0 = start_worker(job, 0, 0, kNextRunTensors, 3, 2, job.dir() + "/b0");
  auto w1 = start_worker(job, 1, 0, kNextRunTensors, 3, 2, job.dir() + "/b1");
  EXPECT_EQ(w0->wait_exit(milliseconds(60000)), 0) << w0->log();
  EXPECT_EQ(w1->wait_exit(milliseconds(60000)), 0) << w1->log();
}

// Connects to 127.0.0.1:port as gateway `rank` of job 77, sends one framed message and waits
// until the gateway resets the connection.
bool send_as_peer(uint16_t port, uint32_t rank, const std::vector<std::byte>& message) {
  RawPeer peer(port);
  tcp::Hello answer;
  return peer.connected() && peer.send_hello(77, rank) && peer.read_hello(&answer) &&
         peer.send_frame(static_cast<uint32_t>(message.size()), message) &&
         peer.read_until_closed() >= 0;
}

TEST(GatewayFaults, TenThousandCorruptedFramesAreCountedAndTheDaemonStaysUp) {
  auto options = job_options(2, 1, "none");
  options.started = 1;
  bench::LocalJob job(options);
  std::mt19937 random(5);
  int sent = 0;
  for (int i = 0; i < 10000; ++i) {
    std::vector<std::byte> message(kEnvelopeBytes + random() % 200);
    for (auto& byte : message) byte = std::byte(random());
    if (i % 2 == 0) {
      // A well-formed envelope of an unknown kind: the envelope check must catch it.
      auto envelope = make_message({MessageKind::kGather, 0, 1, 0, 0}, {});
      std::copy(envelope.begin(), envelope.end(), message.begin());
      message[5] = std::byte{0x7f};
    }
    sent += send_as_peer(job.port(0), 1, message) ? 1 : 0;
  }
  EXPECT_EQ(sent, 10000);
  ASSERT_TRUE(job.gateway(0).running());

  job.start_gateway(1);
  auto w0 = start_worker(job, 0, 0, kTensors, 2, 3, job.dir() + "/a0");
  auto w1 = start_worker(job, 1, 0, kTensors, 2, 3, job.dir() + "/a1");
  EXPECT_EQ(w0->wait_exit(milliseconds(60000)), 0) << w0->log();
  EXPECT_EQ(w1->wait_exit(milliseconds(60000)), 0) << w1->log();
  EXPECT_EQ(job.stop_gateway(0), 0);
  EXPECT_NE(job.gateway(0).log().find("rejected 10000 "), std::string::npos)
      << job.gateway(0).log().substr(job.gateway(0).log().size() - 2000);
}

}  // namespace
}  // namespace gradgate::gateway::testing
