// Malformed traffic from raw sockets: each bad message is counted, answered with ERROR when
// possible, ends its session, and leaves the server serving good clients.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gradgate/ingress_protocol.h"
#include "ingress_fixture.h"
#include "raw_connection.h"

namespace gradgate::gateway::testing {
namespace {

class MalformedTest : public IngressTest {
 protected:
  /// A good client still completes a round trip.
  void expect_good_client_served() {
    gg_client* client = connect(3);
    ASSERT_NE(client, nullptr);
    gg_tensor* tensor = nullptr;
    ASSERT_EQ(gg_declare(client, "good", 4, GG_FP32, 0, 0, 0.0, &tensor), GG_OK);
    static_cast<float*>(gg_tensor_data(tensor))[0] = 1.5f;
    gg_request* request = nullptr;
    ASSERT_EQ(gg_allreduce(tensor, &request), GG_OK);
    ASSERT_EQ(gg_wait(request, 10000, nullptr), GG_OK) << gg_last_error();
    EXPECT_EQ(static_cast<float*>(gg_tensor_data(tensor))[0], 3.0f);
    ASSERT_EQ(gg_close(client), GG_OK);
  }
};

TEST_F(MalformedTest, GarbageIsAProtocolError) {
  RawConnection raw(socket_path_);
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.send(std::vector<std::byte>(40, std::byte{0x5a})));
  EXPECT_NE(raw.expect_error_then_eof().find("without the protocol's header"), std::string::npos);
  EXPECT_EQ(server_->stats().protocol_errors, 1u);
  expect_good_client_served();
}

TEST_F(MalformedTest, WrongVersionIsAProtocolError) {
  RawConnection raw(socket_path_);
  auto packet = proto::encode(1, proto::Hello{0});
  const uint16_t version = 99;
  std::memcpy(packet.data() + 4, &version, sizeof version);
  ASSERT_TRUE(raw.send(packet));
  const std::string expected = "protocol version 99, the gateway speaks " +
                               std::to_string(proto::kOldestVersion) + " to " +
                               std::to_string(proto::kVersion);
  EXPECT_NE(raw.expect_error_then_eof().find(expected), std::string::npos);
  EXPECT_EQ(server_->stats().protocol_errors, 1u);
  EXPECT_TRUE(handler_.connected.empty());
  expect_good_client_served();
}

TEST_F(MalformedTest, RequestsBeforeHelloAreProtocolErrors) {
  {
    RawConnection raw(socket_path_);
    ASSERT_TRUE(raw.send(proto::encode(5, proto::Allreduce{100})));
    EXPECT_NE(raw.expect_error_then_eof().find("ALLREDUCE before HELLO"), std::string::npos);
  }
  {
    RawConnection raw(socket_path_);
    ASSERT_TRUE(raw.send(proto::encode(5, declare_of(4)), memfd_of(16)));
    EXPECT_NE(raw.expect_error_then_eof().find("DECLARE before HELLO"), std::string::npos);
  }
  EXPECT_EQ(server_->stats().protocol_errors, 2u);
  EXPECT_EQ(server_->stats().mapped_bytes, 0u);
  expect_good_client_served();
}

TEST_F(MalformedTest, DeclareWithoutOrWithAWrongDescriptorIsAProtocolError) {
  {
    RawConnection raw(socket_path_);
    raw.hello(0);
    ASSERT_TRUE(raw.send(proto::encode(2, declare_of(4))));
    EXPECT_NE(raw.expect_error_then_eof().find("with 0 descriptors"), std::string::npos);
  }
  {
    RawConnection raw(socket_path_);
    raw.hello(0);
    const int fd = memfd_of(15);
    ASSERT_TRUE(raw.send(proto::encode(2, declare_of(4)), fd));
    close(fd);
    const std::string message = raw.expect_error_then_eof();
    EXPECT_NE(message.find("15 bytes, the tensor needs 16"), std::string::npos) << message;
  }
  {
    // The right size but not sealed: the worker could shrink it under the gateway.
    RawConnection raw(socket_path_);
    raw.hello(0);
    const int fd = memfd_of(16);
    ASSERT_TRUE(raw.send(proto::encode(2, declare_of(4)), fd));
    close(fd);
    const std::string message = raw.expect_error_then_eof();
    EXPECT_NE(message.find("F_SEAL_SHRINK"), std::string::npos) << message;
  }
  {
    RawConnection raw(socket_path_);
    raw.hello(0);
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    ASSERT_TRUE(raw.send(proto::encode(2, declare_of(4)), pipe_fds[0]));
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    EXPECT_NE(raw.expect_error_then_eof().find("not a regular file"), std::string::npos);
  }
  {
    // Sealed against writes: the gateway cannot write the sum into it. The worker's fault, not
    // a lack of memory on the gateway (GG_RESOURCE_EXHAUSTED would send its operator hunting).
    RawConnection raw(socket_path_);
    raw.hello(0);
    const int fd = memfd_create("read-only", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ASSERT_EQ(ftruncate(fd, 16), 0);
    ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE), 0);
    ASSERT_TRUE(raw.send(proto::encode(2, declare_of(4)), fd));
    close(fd);
    const std::string message = raw.expect_error_then_eof();
    EXPECT_NE(message.find("cannot be mapped for reading and writing"), std::string::npos)
        << message;
  }
  EXPECT_EQ(server_->stats().protocol_errors, 5u);
  EXPECT_TRUE(handler_.wait_until([&] { return handler_.left.size() == 5; }));
  EXPECT_EQ(server_->stats().mapped_bytes, 0u);
  expect_good_client_served();
}

TEST_F(MalformedTest, DeclareCudaWithADescriptorOrBeforeHelloIsAProtocolError) {
  proto::DeclareCuda declare;
  declare.tensor = declare_of(4);
  {
    RawConnection raw(socket_path_);
    raw.hello(0);
    const int fd = memfd_of(16);
    ASSERT_TRUE(raw.send(proto::encode(2, declare), fd));
    close(fd);
    const std::string message = raw.expect_error_then_eof();
    EXPECT_NE(message.find("DECLARE_CUDA \"raw\" with 1 descriptors (none expected)"),
              std::string::npos)
        << message;
  }
  {
    RawConnection raw(socket_path_);
    ASSERT_TRUE(raw.send(proto::encode(2, declare)));
    EXPECT_NE(raw.expect_error_then_eof().find("DECLARE_CUDA before HELLO"), std::string::npos);
  }
  {
    RawConnection raw(socket_path_);
    raw.hello(0);
    auto packet = proto::encode(2, declare);
    packet.pop_back();
    ASSERT_TRUE(raw.send(packet));
    EXPECT_NE(raw.expect_error_then_eof().find("a malformed DECLARE_CUDA"), std::string::npos);
  }
  {
    RawConnection raw(socket_path_);
    raw.hello(0);
    declare.tensor.elements = 0;
    ASSERT_TRUE(raw.send(proto::encode(2, declare)));
    EXPECT_NE(raw.expect_error_then_eof().find("0 elements"), std::string::npos);
  }
  EXPECT_EQ(server_->stats().protocol_errors, 4u);
  EXPECT_EQ(server_->stats().cuda_mappings, 0u);
  expect_good_client_served();
}

TEST_F(MalformedTest, UnknownTypeAndBadLengthsAreProtocolErrors) {
  {
    RawConnection raw(socket_path_);
    auto packet = proto::encode(1, proto::Hello{0});
    const uint16_t type = 77;
    std::memcpy(packet.data() + 6, &type, sizeof type);
    ASSERT_TRUE(raw.send(packet));
    EXPECT_NE(raw.expect_error_then_eof().find("unknown type 77"), std::string::npos);
  }
  {
    RawConnection raw(socket_path_);
    auto packet = proto::encode(1, proto::Hello{0});
    packet.push_back(std::byte{0});
    ASSERT_TRUE(raw.send(packet));
    EXPECT_NE(raw.expect_error_then_eof().find("malformed HELLO"), std::string::npos);
  }
  {
    RawConnection raw(socket_path_);
    ASSERT_TRUE(raw.send(std::vector<std::byte>(proto::kMaxPacketBytes + 1)));
    EXPECT_NE(raw.expect_error_then_eof().find("longer than"), std::string::npos);
  }
  EXPECT_EQ(server_->stats().protocol_errors, 3u);
  expect_good_client_served();
}

// RELEASE came with protocol version 4: a client that speaks 3 cannot send it, and one that does
// is malformed; before HELLO too.
TEST_F(MalformedTest, AReleaseOfAnOlderVersionOrBeforeHelloIsAProtocolError) {
  {
    RawConnection raw(socket_path_);
    ASSERT_TRUE(raw.send(proto::encode(1, proto::Hello{0}, 3)));
    ASSERT_TRUE(raw.receive().has_value());
    ASSERT_TRUE(raw.send(proto::encode(2, proto::Release{1}, 3)));
    EXPECT_NE(raw.expect_error_then_eof().find("RELEASE in protocol version 3"), std::string::npos);
  }
  {
    RawConnection raw(socket_path_);
    ASSERT_TRUE(raw.send(proto::encode(1, proto::Release{1})));
    EXPECT_NE(raw.expect_error_then_eof().find("RELEASE before HELLO"), std::string::npos);
  }
  EXPECT_EQ(server_->stats().protocol_errors, 2u);
  expect_good_client_served();
}

TEST_F(MalformedTest, ThousandRandomMessagesAreCountedAndServingGoesOn) {
  constexpr int kMessages = 1000;
  std::mt19937_64 random(1234);
  for (int m = 0; m < kMessages; ++m) {
    RawConnection raw(socket_path_);
    ASSERT_TRUE(raw.connected());
    std::vector<std::byte> packet(1 + random() % proto::kMaxPacketBytes);
    for (auto& b : packet) b = static_cast<std::byte>(random());
    if (m % 2 == 1 && packet.size() >= 8) {  // half keep a valid magic and version
      std::memcpy(packet.data(), &proto::kMagic, 4);
      std::memcpy(packet.data() + 4, &proto::kVersion, 2);
    }
    ASSERT_TRUE(raw.send(packet));
    const std::string message = raw.expect_error_then_eof();
    ASSERT_EQ(message.find('<'), std::string::npos) << "message " << m << ": " << message;
  }
  EXPECT_EQ(server_->stats().protocol_errors, static_cast<uint64_t>(kMessages));
  EXPECT_EQ(server_->stats().mapped_bytes, 0u);
  expect_good_client_served();
}

}  // namespace
}  // namespace gradgate::gateway::testing
