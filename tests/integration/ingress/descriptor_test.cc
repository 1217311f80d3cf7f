// Out of file descriptors, the ingress refuses a worker's connection (accepts and closes it at
// once, counted) instead of leaving it in the backlog, where it would wake the server's loop at
// once, turn after turn; once descriptors are free again it serves as before.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "ingress_fixture.h"
#include "scoped_limit.h"

namespace gradgate::gateway::testing {
namespace {

// Takes every file descriptor of this process below a limit of 256, and gives them back when it
// goes.
class DescriptorShortage {
 public:
  explicit DescriptorShortage(int any_fd) {
    for (rlim_t i = 0; i < kLimit; ++i) {
      const int fd = dup(any_fd);
      if (fd < 0) break;
      taken_.push_back(fd);
    }
    exhausted_ = dup(any_fd) < 0 && errno == EMFILE;
  }
  ~DescriptorShortage() {
    for (int fd : taken_) close(fd);
  }
  bool exhausted() const { return exhausted_; }

 private:
  static constexpr rlim_t kLimit = 256;
  gradgate::testing::ScopedLimit limit_{RLIMIT_NOFILE, kLimit};
  std::vector<int> taken_;
  bool exhausted_ = false;
};

TEST_F(IngressTest, OutOfFileDescriptorsAConnectionIsRefusedAndServingGoesOn) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Their runtimes need descriptors of their own (UBSan's memory check opens a pipe) and report
  // errors that are not there when none is left.
  GTEST_SKIP() << "the sanitizers' runtimes need file descriptors of their own";
#endif
  const int worker = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_GE(worker, 0) << std::strerror(errno);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path_.c_str(), sizeof(address.sun_path) - 1);
  {
    DescriptorShortage shortage(worker);
    ASSERT_TRUE(shortage.exhausted());
    ASSERT_EQ(::connect(worker, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0)
        << std::strerror(errno);
    // The server closes the connection: end of file, not a wait until the test gives up.
    pollfd ready{worker, POLLIN, 0};
    ASSERT_EQ(poll(&ready, 1, 20000), 1) << "the connection was left waiting";
    char byte = 0;
    EXPECT_EQ(recv(worker, &byte, 1, 0), 0);
  }
  close(worker);
  EXPECT_EQ(server_->stats().connections_refused, 1u);
  EXPECT_EQ(server_->stats().sessions_opened, 0u);

  gg_client* client = connect(0);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(server_->stats().sessions_opened, 1u);
  ASSERT_EQ(gg_close(client), GG_OK);
}

}  // namespace
}  // namespace gradgate::gateway::testing
