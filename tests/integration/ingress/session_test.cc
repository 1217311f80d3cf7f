// Connecting: hello, job info, refusal by the handler, the socket file.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "ingress_fixture.h"
#include "raw_connection.h"

namespace gradgate::gateway::testing {
namespace {

TEST_F(IngressTest, ConnectReportsTheJobAndJoinsTheWorker) {
  gg_client* client = connect(2);
  ASSERT_NE(client, nullptr);
  gg_job_info job{};
  ASSERT_EQ(gg_job(client, &job), GG_OK);
  EXPECT_EQ(job.node_rank, 1u);
  EXPECT_EQ(job.nodes, 2u);
  EXPECT_EQ(job.local_workers, 4u);
  EXPECT_EQ(job.world_size, 8u);
  uint32_t timeout_ms = 0;
  ASSERT_EQ(gg_collective_timeout(client, &timeout_ms), GG_OK);
  EXPECT_EQ(timeout_ms, 4321u);
  EXPECT_TRUE(handler_.wait_until([&] { return handler_.connected.contains(2); }));
  EXPECT_EQ(server_->stats().sessions_opened, 1u);

  ASSERT_EQ(gg_close(client), GG_OK);
  EXPECT_TRUE(handler_.wait_until([&] { return handler_.left.size() == 1; }));
  EXPECT_EQ(handler_.left.front(), 2u);
  EXPECT_TRUE(poll_until([&] { return server_->stats().sessions_closed == 1; }));
}

TEST_F(IngressTest, SocketFileHasMode0660) {
  struct stat st {};
  ASSERT_EQ(stat(socket_path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
}

TEST_F(IngressTest, HandlerRefusalReachesTheClient) {
  gg_client* client = nullptr;
  EXPECT_EQ(gg_connect(socket_path_.c_str(), 7, &client), GG_REJECTED);
  EXPECT_EQ(client, nullptr);
  EXPECT_NE(std::string(gg_last_error()).find("local rank 7 is not below 4"), std::string::npos)
      << gg_last_error();
  EXPECT_EQ(server_->stats().protocol_errors, 0u);

  gg_client* first = connect(1);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(gg_connect(socket_path_.c_str(), 1, &client), GG_RANK_IN_USE);
  EXPECT_NE(std::string(gg_last_error()).find("already connected"), std::string::npos);
  ASSERT_EQ(gg_close(first), GG_OK);
}

// A worker whose library is one protocol version older is served in its version, and a rank in
// use reaches it as the refusal it knows.
TEST_F(IngressTest, AWorkerOfTheOlderProtocolVersionIsAnsweredInIt) {
  namespace proto = gradgate::ingress_protocol;
  // The reply to a HELLO in the older version, checked to be written in it and of `type`.
  auto reply_to_hello = [&](RawConnection& raw, proto::MessageType type) {
    EXPECT_TRUE(raw.send(proto::encode(1, proto::Hello{0}, proto::kOldestVersion)));
    const auto reply = raw.receive().value_or(std::vector<std::byte>{});
    const auto header = proto::decode_header(reply);
    EXPECT_TRUE(header && header->version == proto::kOldestVersion && header->type == type);
    return reply;
  };
  RawConnection old_worker(socket_path_);
  const auto hello_ok =
      proto::decode_body<proto::HelloOk>(reply_to_hello(old_worker, proto::MessageType::kHelloOk));
  ASSERT_TRUE(hello_ok.has_value());
  EXPECT_EQ(hello_ok->world_size, 8u);
  EXPECT_FALSE(hello_ok->collective_timeout_ms.has_value()) << "a field the old worker can't read";
  RawConnection second_old_worker(socket_path_);
  const auto refused = reply_to_hello(second_old_worker, proto::MessageType::kError);
  const auto error = proto::decode_body<proto::Error>(refused);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->status, GG_REJECTED);
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
}

// The step's codec reaches a worker of the current version; one of the version before it gets the
// ALLREDUCE_DONE it knows, without it.
TEST_F(IngressTest, OnlyAWorkerThatKnowsTheCodecFieldGetsIt) {
  namespace proto = gradgate::ingress_protocol;
  // One local rank each: the first session's may still be held while the gateway closes it.
  for (const auto& [version, rank] : {std::pair{proto::kVersion, 0u},
                                      std::pair{uint16_t{proto::kFirstVersionWithCodec - 1}, 1u}}) {
    RawConnection raw(socket_path_);
    ASSERT_TRUE(raw.connected());
    raw.hello(rank, version);
    FloatMemfd buffer(16, 1.0f);
    const uint32_t key = declare(raw, 2, 16, buffer, version);
    ASSERT_TRUE(raw.send(proto::encode(3, proto::Allreduce{key}, version)));
    const auto reply = raw.receive().value_or(std::vector<std::byte>{});
    const auto header = proto::decode_header(reply);
    ASSERT_TRUE(header && header->version == version);
    const auto done = proto::decode_body<proto::AllreduceDone>(reply);
    ASSERT_TRUE(done.has_value());
    EXPECT_EQ(done->status, GG_OK) << done->message;
    EXPECT_EQ(buffer.values(), std::vector<float>(16, 2.0f));
    if (version == proto::kVersion) {
      EXPECT_EQ(done->codec, std::optional<uint8_t>(GG_CODEC_NONE)) << "step 0's, from the handler";
    } else {
      EXPECT_FALSE(done->codec.has_value()) << "a field the old worker can't read";
    }
  }
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
}

TEST_F(IngressTest, NoGatewayIsConnectFailed) {
  gg_client* client = nullptr;
  const std::string missing = dir_.path() + "/missing.sock";
  EXPECT_EQ(gg_connect(missing.c_str(), 0, &client), GG_CONNECT_FAILED);
  EXPECT_NE(std::string(gg_last_error()).find("missing.sock"), std::string::npos);
}

TEST_F(IngressTest, StaleSocketIsReplacedAndALiveOneIsNot) {
  auto second = make_unix_ingress_server(socket_path_);
  DoublingHandler other;
  const Status live = second->start(other);
  EXPECT_EQ(live.code(), ErrorCode::kUnavailable) << live.to_string();

  server_->stop();
  server_->stop();  // idempotent
  // Leave a stale socket file behind: bind one and close it without unlinking.
  const std::string stale = dir_.path() + "/stale.sock";
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, stale.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  close(fd);
  auto replacement = make_unix_ingress_server(stale);
  const Status replaced = replacement->start(other);
  EXPECT_TRUE(replaced.ok()) << replaced.to_string();
  gg_client* client = nullptr;
  EXPECT_EQ(gg_connect(stale.c_str(), 0, &client), GG_OK) << gg_last_error();
  EXPECT_EQ(gg_close(client), GG_OK);
  replacement->stop();
}

// Another program's socket at the path (a stream socket, here) is neither taken over nor
// removed: the gateway refuses to start, naming it.
TEST_F(IngressTest, AnotherProgramsSocketIsLeftAlone) {
  const std::string path = dir_.path() + "/other.sock";
  const int other = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, path.c_str());
  ASSERT_EQ(bind(other, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(other, 4), 0);
  struct stat before {};
  ASSERT_EQ(stat(path.c_str(), &before), 0);

  auto gateway = make_unix_ingress_server(path);
  DoublingHandler handler;
  const Status started = gateway->start(handler);
  EXPECT_EQ(started.code(), ErrorCode::kUnavailable) << started.to_string();
  EXPECT_NE(started.message().find("not a stale gateway's"), std::string::npos)
      << started.to_string();
  struct stat after {};
  ASSERT_EQ(stat(path.c_str(), &after), 0) << "the other program's socket was removed";
  EXPECT_EQ(after.st_ino, before.st_ino);
  gateway->stop();
  close(other);
}

}  // namespace
}  // namespace gradgate::gateway::testing
