// The fixture of the ingress tests: a temporary directory, a DoublingHandler and a running
// Unix ingress server on a socket in that directory.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "doubling_handler.h"
#include "gateway/ingress/ingress.h"
#include "gradgate/client.h"

namespace gradgate::gateway::testing {

/// A directory made by mkdtemp, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/gg-ingress-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Polls `condition` until it holds or `timeout` passes (for state without a notification, such
/// as the server's counters).
inline bool poll_until(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

class IngressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_path_ = dir_.path() + "/ingress.sock";
    server_ = make_unix_ingress_server(socket_path_);
    const Status status = server_->start(handler_);
    ASSERT_TRUE(status.ok()) << status.to_string();
  }
  void TearDown() override { server_->stop(); }

  /// A connected client as worker `local_rank`; fails the test if it cannot connect.
  gg_client* connect(uint32_t local_rank = 0) {
    gg_client* client = nullptr;
    const gg_status status = gg_connect(socket_path_.c_str(), local_rank, &client);
    EXPECT_EQ(status, GG_OK) << gg_last_error();
    return client;
  }

  /// A client that declared one fp32 tensor and started its all-reduce; request is null when a
  /// step failed (the failure is reported).
  struct Started {
    gg_client* client = nullptr;
    gg_tensor* tensor = nullptr;
    gg_request* request = nullptr;
  };
  Started start_allreduce(const char* name, uint64_t elements, uint32_t local_rank = 0) {
    Started started;
    started.client = connect(local_rank);
    if (started.client == nullptr) return started;
    EXPECT_EQ(gg_declare(started.client, name, elements, GG_FP32, 0, 0, 0.0, &started.tensor),
              GG_OK)
        << gg_last_error();
    if (started.tensor == nullptr) return started;
    EXPECT_EQ(gg_allreduce(started.tensor, &started.request), GG_OK) << gg_last_error();
    return started;
  }

  TempDir dir_;
  std::string socket_path_;
  DoublingHandler handler_;
  std::unique_ptr<IngressServer> server_;
};

}  // namespace gradgate::gateway::testing
