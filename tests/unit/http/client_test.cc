// The HTTP client's one deadline covers connect, send and receive: a server that takes the
// connection and never answers, or stops half-way through its answer, costs the caller the
// timeout it gave, not a blocked thread.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "common/http/client.h"

namespace gradgate::http {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A TCP socket listening on 127.0.0.1 at a port the system picks. The kernel completes the
// handshakes of connecting clients whether or not anybody accepts.
class SilentServer {
 public:
  SilentServer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
          listen(fd_, 8) == 0 &&
          getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0;
    port_ = ntohs(address.sin_port);
  }
  ~SilentServer() { close(fd_); }
  bool ok() const { return ok_; }
  uint16_t port() const { return port_; }
  /// Accepts one connection (waiting up to 10 s); -1 if none came.
  int accept_one() {
    pollfd ready{.fd = fd_, .events = POLLIN, .revents = 0};
    if (poll(&ready, 1, 10000) != 1) return -1;
    return accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  bool ok_ = false;
};

ClientOptions options_for(const SilentServer& server) {
  ClientOptions options;
  options.port = server.port();
  options.timeout = milliseconds(300);
  return options;
}

TEST(HttpClient, AServerThatNeverAnswersCostsTheTimeout) {
  SilentServer server;
  ASSERT_TRUE(server.ok());
  const auto start = Clock::now();
  const auto answer = send_request(options_for(server), verb::get, "/v1/policy");
  const auto took = Clock::now() - start;
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), ErrorCode::kTimeout) << answer.status().to_string();
  EXPECT_NE(answer.status().message().find("reading the answer of 127.0.0.1:"), std::string::npos)
      << answer.status().to_string();
  EXPECT_GE(took, milliseconds(250));
  EXPECT_LT(took, milliseconds(10000));
}

TEST(HttpClient, AnAnswerThatStopsHalfWayCostsTheTimeout) {
  SilentServer server;
  ASSERT_TRUE(server.ok());
  std::thread half_answer([&server] {
    const int connection = server.accept_one();
    if (connection < 0) return;
    const std::string start = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"version\":";
    (void)!write(connection, start.data(), start.size());
    // Hold the connection open until the client has given up and closed its end.
    pollfd closed{.fd = connection, .events = POLLIN, .revents = 0};
    char drain[256];
    while (poll(&closed, 1, 10000) == 1 && read(connection, drain, sizeof drain) > 0) {
    }
    close(connection);
  });
  const auto answer = send_request(options_for(server), verb::get, "/v1/policy");
  half_answer.join();
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), ErrorCode::kTimeout) << answer.status().to_string();
}

// Cancelled from another thread while it waits for the answer, a request returns kAborted at
// once instead of at its deadline; so does every later request with the same cancel.
TEST(HttpClient, ACancelledRequestReturnsAtOnceAndSoDoLaterOnes) {
  SilentServer server;
  ASSERT_TRUE(server.ok());
  RequestCancel cancel;
  ClientOptions options = options_for(server);
  options.timeout = milliseconds(60000);
  options.cancel = &cancel;
  const auto start = Clock::now();
  int connection = -1;
  std::thread canceller([&server, &cancel, &connection] {
    connection = server.accept_one();  // the request is connected: sending or waiting
    cancel.cancel();
  });
  const auto answer = send_request(options, verb::get, "/v1/policy?wait_ms=60000");
  canceller.join();
  if (connection >= 0) close(connection);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), ErrorCode::kAborted) << answer.status().to_string();
  EXPECT_LT(Clock::now() - start, milliseconds(10000));

  const auto later = send_request(options, verb::get, "/v1/policy");
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.status().code(), ErrorCode::kAborted) << later.status().to_string();
}

}  // namespace
}  // namespace gradgate::http
