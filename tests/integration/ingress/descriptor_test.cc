// Out of file descriptors, the ingress refuses a worker's connection (accepts and closes it at
// once, counted) instead of leaving it in the backlog, where it would wake the server's loop at
// once, turn after turn; a DECLARE whose memfd it cannot take gets GG_RESOURCE_EXHAUSTED and the
// session goes on; once descriptors are free again it serves as before.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "ingress_fixture.h"
#include "raw_connection.h"
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
  if (gradgate::testing::kSanitizerRuntime) {
    GTEST_SKIP() << "the sanitizers' runtimes need file descriptors of their own";
  }
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

TEST_F(IngressTest, OutOfFileDescriptorsADeclareIsRefusedAndTheSessionGoesOn) {
  if (gradgate::testing::kSanitizerRuntime) {
    GTEST_SKIP() << "the sanitizers' runtimes need file descriptors of their own";
  }
  RawConnection raw(socket_path_);
  ASSERT_TRUE(raw.connected());
  raw.hello(0);
  const FloatMemfd memfd(4, 0.0f);
  const int buffer = memfd.fd;
  std::optional<std::vector<std::byte>> reply;
  {
    DescriptorShortage shortage(buffer);
    ASSERT_TRUE(shortage.exhausted());
    ASSERT_TRUE(raw.send(proto::encode(7, declare_of(4)), buffer));
    reply = raw.receive();
  }
  ASSERT_TRUE(reply.has_value() && !reply->empty()) << "no answer, or the session was closed";
  const auto header = proto::decode_header(*reply);
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(header->request_id, 7u);
  ASSERT_EQ(header->type, proto::MessageType::kError);
  const auto error = proto::decode_body<proto::Error>(*reply);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->status, GG_RESOURCE_EXHAUSTED) << error->message;
  EXPECT_NE(error->message.find("out of file descriptors"), std::string::npos) << error->message;
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
  EXPECT_EQ(server_->stats().connections_refused, 1u);

  // Descriptors free again: the same session declares the tensor.
  ASSERT_TRUE(raw.send(proto::encode(8, declare_of(4)), buffer));
  const auto declared = raw.receive();
  ASSERT_TRUE(declared.has_value() && !declared->empty());
  EXPECT_EQ(proto::decode_header(*declared)->type, proto::MessageType::kDeclareOk);
}

}  // namespace
}  // namespace gradgate::gateway::testing
