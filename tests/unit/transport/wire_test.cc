// The pure pieces of the TCP transport: handshake and length-prefix bytes, backoff, log throttle.
#include "gateway/transport/tcp/wire.h"

#include <gtest/gtest.h>

#include "gateway/transport/log_throttle.h"
#include "gateway/transport/tcp/backoff.h"

namespace gradgate::gateway::tcp {
namespace {

TEST(WireTest, HandshakeIsMagicVersionJobAndRankLittleEndian) {
  const HandshakeBytes bytes = encode_handshake({0x0102030405060708ull, 0x0A0B0C0Du});
  const uint8_t expected[kHandshakeBytes] = {'G',  'G',  'T',  '1',  2,    0x08, 0x07, 0x06, 0x05,
                                             0x04, 0x03, 0x02, 0x01, 0x0D, 0x0C, 0x0B, 0x0A};
  for (std::size_t i = 0; i < kHandshakeBytes; ++i) {
    EXPECT_EQ(std::to_integer<uint8_t>(bytes[i]), expected[i]) << "byte " << i;
  }
  Result<Hello> decoded = decode_handshake(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, (Hello{0x0102030405060708ull, 0x0A0B0C0Du}));
}

TEST(WireTest, HandshakeWithWrongMagicOrVersionIsIncompatible) {
  HandshakeBytes bad_magic = encode_handshake({1, 2});
  bad_magic[3] = std::byte{'2'};
  EXPECT_EQ(decode_handshake(bad_magic).status().code(), ErrorCode::kIncompatible);
  HandshakeBytes bad_version = encode_handshake({1, 2});
  bad_version[4] = std::byte{kProtocolVersion + 1};
  EXPECT_EQ(decode_handshake(bad_version).status().code(), ErrorCode::kIncompatible);
}

TEST(WireTest, LengthPrefixRoundTripsAndRejectsZeroAndOversize) {
  const LengthPrefix bytes = encode_length(0x01020304u);
  EXPECT_EQ(std::to_integer<uint8_t>(bytes[0]), 0x04);
  EXPECT_EQ(std::to_integer<uint8_t>(bytes[3]), 0x01);
  Result<Length> length = decode_length(bytes, 1ull << 30);
  ASSERT_TRUE(length.ok());
  EXPECT_EQ(length->bytes, 0x01020304u);
  EXPECT_FALSE(length->probe);
  EXPECT_EQ(decode_length(encode_length(0), 100).status().code(), ErrorCode::kMalformedFrame);
  EXPECT_EQ(decode_length(encode_length(101), 100).status().code(), ErrorCode::kMalformedFrame);
  EXPECT_TRUE(decode_length(encode_length(100), 100).ok());
}

TEST(WireTest, ProbeFlagTravelsBesideTheLength) {
  auto probe = decode_length(encode_length(kMaxLength, true), kMaxLength);
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ(probe->bytes, kMaxLength);
  EXPECT_TRUE(probe->probe);
  // A probe is bounded like any message: its length without the flag is checked.
  EXPECT_EQ(decode_length(encode_length(101, true), 100).status().code(),
            ErrorCode::kMalformedFrame);
  EXPECT_EQ(decode_length(encode_length(0, true), 100).status().code(), ErrorCode::kMalformedFrame);
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
