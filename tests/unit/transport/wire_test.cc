// The pure pieces of the TCP transport: handshake, length-prefix and control bytes, backoff, log
// throttle.
#include "gateway/transport/tcp/wire.h"

#include <gtest/gtest.h>

#include <span>
#include <vector>

#include "gradgate/base/log_throttle.h"
#include "gateway/transport/tcp/backoff.h"

namespace gradgate::gateway::tcp {
namespace {

TEST(WireTest, HandshakeIsMagicVersionJobRankAndSessionLittleEndian) {
  Hello hello;
  hello.job_id = 0x0102030405060708ull;
  hello.rank = 0x0A0B0C0Du;
  hello.listen_port = 0x4142;
  hello.incarnation = 0x1112131415161718ull;
  hello.peer_incarnation = 0x2122232425262728ull;
  hello.received = 0x3132333435363738ull;
  hello.session_id = 0x5152535455565758ull;
  hello.resumed = true;
  const HandshakeBytes bytes = encode_handshake(hello);
  const uint8_t expected[kHandshakeBytes] = {
      'G',  'G',  'T',  '1',  3,    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
      0x0D, 0x0C, 0x0B, 0x0A, 0x42, 0x41, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12,
      0x11, 0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21, 0x38, 0x37, 0x36, 0x35,
      0x34, 0x33, 0x32, 0x31, 0x58, 0x57, 0x56, 0x55, 0x54, 0x53, 0x52, 0x51, 0x01};
  for (std::size_t i = 0; i < kHandshakeBytes; ++i) {
    EXPECT_EQ(std::to_integer<uint8_t>(bytes[i]), expected[i]) << "byte " << i;
  }
  Result<Hello> decoded = decode_handshake(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, hello);
}

TEST(WireTest, HandshakeWithWrongMagicVersionIncarnationOrFlagsIsIncompatible) {
  const Hello hello{.job_id = 1, .rank = 2, .listen_port = 9, .incarnation = 3};
  HandshakeBytes bad_magic = encode_handshake(hello);
  bad_magic[3] = std::byte{'2'};
  EXPECT_EQ(decode_handshake(bad_magic).status().code(), ErrorCode::kIncompatible);
  HandshakeBytes bad_version = encode_handshake(hello);
  bad_version[4] = std::byte{kProtocolVersion - 1};  // the protocol before sessions
  EXPECT_EQ(decode_handshake(bad_version).status().code(), ErrorCode::kIncompatible);
  EXPECT_EQ(decode_handshake(encode_handshake({.job_id = 1, .rank = 2, .listen_port = 9}))
                .status()
                .code(),
            ErrorCode::kIncompatible)
      << "incarnation 0 means none";
  HandshakeBytes bad_flags = encode_handshake(hello);
  bad_flags[51] = std::byte{2};
  EXPECT_EQ(decode_handshake(bad_flags).status().code(), ErrorCode::kIncompatible);
}

TEST(WireTest, LengthPrefixRoundTripsAndRejectsZeroAndOversize) {
  const LengthPrefix bytes = encode_length(0x01020304u);
  EXPECT_EQ(std::to_integer<uint8_t>(bytes[0]), 0x04);
  EXPECT_EQ(std::to_integer<uint8_t>(bytes[3]), 0x01);
  Result<Length> length = decode_length(bytes, 1ull << 30);
  ASSERT_TRUE(length.ok());
  EXPECT_EQ(length->bytes, 0x01020304u);
  EXPECT_FALSE(length->control);
  EXPECT_EQ(decode_length(encode_length(0), 100).status().code(), ErrorCode::kMalformedFrame);
  EXPECT_EQ(decode_length(encode_length(101), 100).status().code(), ErrorCode::kMalformedFrame);
  EXPECT_TRUE(decode_length(encode_length(100), 100).ok());
}

TEST(WireTest, ControlFlagTravelsBesideTheLength) {
  auto control = decode_length(encode_length(kMaxLength, true), kMaxLength);
  ASSERT_TRUE(control.ok());
  EXPECT_EQ(control->bytes, kMaxLength);
  EXPECT_TRUE(control->control);
  // A control frame is bounded like any message: its length without the flag is checked.
  EXPECT_EQ(decode_length(encode_length(101, true), 100).status().code(),
            ErrorCode::kMalformedFrame);
  EXPECT_EQ(decode_length(encode_length(0, true), 100).status().code(), ErrorCode::kMalformedFrame);
}

TEST(WireTest, ControlFramesAreProbesAcknowledgementsAndGoodbyes) {
  const AckBytes ack = encode_ack(0x0102030405060708ull);
  EXPECT_EQ(std::to_integer<uint8_t>(ack[0]), 1);
  EXPECT_EQ(std::to_integer<uint8_t>(ack[1]), 0x08);
  Result<Control> decoded = decode_control(ack);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->kind, ControlKind::kAck);
  EXPECT_EQ(decoded->delivered, 0x0102030405060708ull);

  const std::vector<std::byte> probe(4096, std::byte{0});
  ASSERT_TRUE(decode_control(probe).ok());
  EXPECT_EQ(decode_control(probe)->kind, ControlKind::kProbe);
  const std::byte goodbye[] = {std::byte{2}};
  ASSERT_TRUE(decode_control(goodbye).ok());
  EXPECT_EQ(decode_control(goodbye)->kind, ControlKind::kGoodbye);

  // Wrong sizes and unknown kinds are malformed.
  EXPECT_EQ(decode_control(std::span(ack).first(8)).status().code(), ErrorCode::kMalformedFrame);
  const std::byte long_goodbye[] = {std::byte{2}, std::byte{0}};
  EXPECT_EQ(decode_control(long_goodbye).status().code(), ErrorCode::kMalformedFrame);
  const std::byte unknown[] = {std::byte{3}};
  EXPECT_EQ(decode_control(unknown).status().code(), ErrorCode::kMalformedFrame);
  EXPECT_EQ(decode_control({}).status().code(), ErrorCode::kMalformedFrame);
}

TEST(BackoffTest, DoublesUpToTheMaximumAndResets) {
  using std::chrono::milliseconds;
  Backoff backoff(milliseconds(50), milliseconds(300));
  EXPECT_EQ(backoff.next(), milliseconds(50));
  EXPECT_EQ(backoff.next(), milliseconds(100));
  EXPECT_EQ(backoff.next(), milliseconds(200));
  EXPECT_EQ(backoff.next(), milliseconds(300));
  EXPECT_EQ(backoff.next(), milliseconds(300));
  backoff.reset();
  EXPECT_EQ(backoff.next(), milliseconds(50));
}

TEST(LogThrottleTest, AdmitsOneLinePerKeyAndIntervalAndCountsTheRest) {
  LogThrottle throttle(std::chrono::seconds(1));
  const auto t0 = LogThrottle::Clock::time_point{} + std::chrono::hours(1);
  EXPECT_EQ(throttle.admit(1, t0), 0u);
  EXPECT_EQ(throttle.admit(1, t0 + std::chrono::milliseconds(10)), std::nullopt);
  EXPECT_EQ(throttle.admit(1, t0 + std::chrono::milliseconds(20)), std::nullopt);
  EXPECT_EQ(throttle.admit(2, t0 + std::chrono::milliseconds(20)), 0u);  // another key
  EXPECT_EQ(throttle.admit(1, t0 + std::chrono::seconds(2)), 2u);
}

}  // namespace
}  // namespace gradgate::gateway::tcp
