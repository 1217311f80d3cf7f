// Endings: the gateway stopping, the client closing with requests pending, a worker process
// killed mid all-reduce; what a client keeps of its tensors while it lives.
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "client_state.h"
#include "ingress_fixture.h"
#include "worker_process.h"

namespace gradgate::gateway::testing {
namespace {

using std::chrono::seconds;

TEST_F(IngressTest, GatewayStoppingEndsPendingWaitsWithClosed) {
  const Started started = start_allreduce("hold", 16);
  gg_request* request = started.request;
  ASSERT_NE(request, nullptr);
  ASSERT_TRUE(handler_.wait_until([&] { return handler_.held_count() == 1; }));
  auto waited = std::async(std::launch::async, [request] {
    const gg_status status = gg_wait(request, -1, nullptr);
    return std::make_pair(status, std::string(gg_last_error()));
  });

  server_->stop();
  ASSERT_EQ(waited.wait_for(seconds(10)), std::future_status::ready);
  const auto [status, message] = waited.get();
  EXPECT_EQ(status, GG_CLOSED);
  EXPECT_NE(message.find("closed the connection"), std::string::npos) << message;
  EXPECT_TRUE(handler_.wait_until([&] { return handler_.left.size() == 1; }));
  EXPECT_EQ(server_->stats().mapped_bytes, 0u);

  EXPECT_EQ(gg_allreduce(started.tensor, &request), GG_CLOSED);
  EXPECT_NE(std::string(gg_last_error()).find("lost"), std::string::npos) << gg_last_error();
  gg_tensor* later = nullptr;
  EXPECT_EQ(gg_declare(started.client, "later", 4, GG_FP32, 0, 0, 0.0, &later), GG_CLOSED);
  EXPECT_EQ(gg_close(started.client), GG_OK);
}

TEST_F(IngressTest, ClosingTheClientEndsWaitsInOtherThreads) {
  const Started started = start_allreduce("hold", 16);
  gg_client* client = started.client;
  gg_request* request = started.request;
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(gg_wait(request, 0, nullptr), GG_TIMEOUT);
  auto waited = std::async(std::launch::async, [request] { return gg_wait(request, -1, nullptr); });
  // gg_close ends waits that are under way (a wait begun after it would use a freed handle):
  // close once the other thread is inside gg_wait.
  ASSERT_TRUE(poll_until([&] {
    std::lock_guard lock(client->mu);
    return client->waiters == 1;
  }));
  ASSERT_EQ(gg_close(client), GG_OK);
  ASSERT_EQ(waited.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_EQ(waited.get(), GG_CLOSED);
  EXPECT_TRUE(handler_.wait_until([&] { return handler_.left.size() == 1; }));
  EXPECT_TRUE(poll_until([&] { return server_->stats().mapped_bytes == 0; }));
}

TEST_F(IngressTest, KilledWorkerLeavesAndItsBuffersAreUnmapped) {
  const std::string out = dir_.path() + "/killed.bin";
  WorkerProcess worker({"--socket", socket_path_, "--local-rank", "2", "--tensor", "hold-grad:4096",
                        "--tensor", "hold-bias:100:bf16", "--steps", "1", "--seed", "7", "--out",
                        out, "--hang-after-allreduce"});
  ASSERT_TRUE(worker.wait_for_line("started", seconds(20)));
  ASSERT_TRUE(handler_.wait_until([&] { return handler_.held_count() == 2; }));
  EXPECT_EQ(server_->stats().mapped_bytes, 4096u * 4 + 100 * 2);

  worker.kill_now();
  EXPECT_EQ(worker.wait_exit(seconds(10)), 128 + SIGKILL);
  ASSERT_TRUE(handler_.wait_until([&] { return handler_.left.size() == 1; }));
  EXPECT_EQ(handler_.left.front(), 2u);
  EXPECT_EQ(handler_.held_count(), 0u);
  EXPECT_TRUE(poll_until([&] { return server_->stats().mapped_bytes == 0; }));
  EXPECT_EQ(server_->stats().protocol_errors, 0u);

  // The rank is free again for a fresh worker.
  gg_client* client = connect(2);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(gg_close(client), GG_OK);
}

// The descriptors this process has open.
std::size_t open_descriptors() {
  return static_cast<std::size_t>(std::distance(
      std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator{}));
}

// A process that declares a tensor per layer must not run out of descriptors: the buffers stay
// mapped, their memfds are closed once the gateway has its own.
TEST_F(IngressTest, DeclaredTensorsKeepNoDescriptorOpen) {
  gg_client* client = connect();
  ASSERT_NE(client, nullptr);
  const std::size_t before = open_descriptors();
  constexpr int kTensors = 64;
  std::vector<gg_tensor*> tensors(kTensors);
  for (int i = 0; i < kTensors; ++i) {
    const std::string name = "layer" + std::to_string(i);
    ASSERT_EQ(gg_declare(client, name.c_str(), 1024, GG_FP32, 0, 0, 0.0, &tensors[i]), GG_OK)
        << gg_last_error();
  }
  EXPECT_LT(open_descriptors(), before + 8);  // the server of this process closes its own too
  // The buffers are still shared with the gateway: an all-reduce through the last one works.
  float* data = static_cast<float*>(gg_tensor_data(tensors.back()));
  for (int i = 0; i < 1024; ++i) data[i] = static_cast<float>(i);
  gg_request* request = nullptr;
  ASSERT_EQ(gg_allreduce(tensors.back(), &request), GG_OK) << gg_last_error();
  ASSERT_EQ(gg_wait(request, 10000, nullptr), GG_OK) << gg_last_error();
  EXPECT_EQ(data[3], 6.0f);  // doubled by the test gateway
  EXPECT_EQ(gg_close(client), GG_OK);
}

// A released tensor is unmapped on both sides and handed to the core; its handle serves nothing
// any more, and declaring the name again makes a new tensor.
TEST_F(IngressTest, AReleasedTensorIsUnmappedAndCanBeDeclaredAgain) {
  gg_client* client = connect();
  ASSERT_NE(client, nullptr);
  gg_tensor* tensor = nullptr;
  ASSERT_EQ(gg_declare(client, "layer", 1024, GG_FP32, 0, 0, 0.0, &tensor), GG_OK);
  EXPECT_EQ(server_->stats().mapped_bytes, 4096u);
  ASSERT_EQ(gg_release(tensor), GG_OK) << gg_last_error();
  EXPECT_EQ(server_->stats().mapped_bytes, 0u);
  EXPECT_TRUE(handler_.wait_until([&] { return handler_.released.size() == 1; }));
  EXPECT_EQ(gg_tensor_data(tensor), nullptr);
  gg_request* request = nullptr;
  EXPECT_EQ(gg_allreduce(tensor, &request), GG_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gg_last_error()).find("released"), std::string::npos) << gg_last_error();
  EXPECT_EQ(gg_release(tensor), GG_INVALID_ARGUMENT);

  gg_tensor* again = nullptr;
  ASSERT_EQ(gg_declare(client, "layer", 1024, GG_FP32, 0, 0, 0.0, &again), GG_OK);
  EXPECT_NE(again, tensor);
  float* data = static_cast<float*>(gg_tensor_data(again));
  data[5] = 2.5f;
  ASSERT_EQ(gg_allreduce(again, &request), GG_OK) << gg_last_error();
  ASSERT_EQ(gg_wait(request, 10000, nullptr), GG_OK) << gg_last_error();
  EXPECT_EQ(data[5], 5.0f);
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
  EXPECT_EQ(gg_close(client), GG_OK);
}

TEST_F(IngressTest, ATensorWithAnAllreduceInFlightIsNotReleased) {
  Started started = start_allreduce("hold-release", 256);
  ASSERT_NE(started.request, nullptr);
  EXPECT_EQ(gg_release(started.tensor), GG_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gg_last_error()).find("in flight"), std::string::npos) << gg_last_error();
  ASSERT_TRUE(handler_.wait_until([&] { return handler_.held_count() == 1; }));
  handler_.release_held();
  EXPECT_EQ(gg_wait(started.request, 10000, nullptr), GG_OK) << gg_last_error();
  EXPECT_EQ(gg_release(started.tensor), GG_OK) << gg_last_error();
  EXPECT_EQ(gg_close(started.client), GG_OK);
}

}  // namespace
}  // namespace gradgate::gateway::testing
