// The reliability layer's datagrams: the byte layout, round trips, and the refusal of every kind
// of broken datagram (by decode_packet, and by a Session, which must not change its state).
#include <gtest/gtest.h>

#include <set>

#include "gateway/transport/reliable/packet.h"
#include "gateway/transport/reliable/session.h"
#include "gradgate/kernels/crc32c.h"
#include "gradgate/kernels/wire_io.h"
#include "tests/unit/transport/lossy_link.h"

namespace gradgate::gateway::reliable::testing {
namespace {

const PacketHeader kHeader{7, 1, 0, 0xB1, 0xA1};

std::vector<std::byte> payload_of(std::size_t size, uint8_t seed) {
  std::vector<std::byte> payload(size);
  for (std::size_t i = 0; i < size; ++i) payload[i] = std::byte((i * 13 + seed) & 0xff);
  return payload;
}

Datagram data_packet(const DataFields& fields, std::span<const std::byte> payload,
                     const PacketHeader& header = kHeader) {
  Datagram datagram(data_packet_bytes(payload.size()));
  const Result<std::size_t> size = encode_data(header, fields, payload, datagram);
  EXPECT_TRUE(size.ok()) << size.status().to_string();
  return datagram;
}

AckFields ack_with(uint64_t cumulative, uint32_t window, std::vector<SackRange> ranges) {
  AckFields ack;
  ack.cumulative = cumulative;
  ack.window = window;
  for (const SackRange& range : ranges) ack.sacks[ack.sack_count++] = range;
  return ack;
}

Datagram ack_packet(const AckFields& ack) {
  Datagram datagram(ack_packet_bytes(ack.sack_count));
  const Result<std::size_t> size = encode_ack(kHeader, ack, datagram);
  EXPECT_TRUE(size.ok()) << size.status().to_string();
  return datagram;
}

/// Rewrites the CRC after a test changed the bytes before it.
void reseal(Datagram& datagram) {
  const std::size_t body = datagram.size() - kChecksumBytes;
  kernels::wire::store(datagram.data() + body,
                       kernels::crc32c(std::span<const std::byte>(datagram).first(body)));
}

ErrorCode code_of(const Datagram& datagram) { return decode_packet(datagram).status().code(); }

TEST(ReliablePacketTest, DataLayoutIsLittleEndianWithTheCrcLast) {
  const auto payload = payload_of(5, 1);
  const Datagram datagram = data_packet({0x1122334455667788ull, 9, 2, 3}, payload);
  ASSERT_EQ(datagram.size(), 72u + 5u);
  EXPECT_EQ(std::to_integer<char>(datagram[0]), 'G');
  EXPECT_EQ(std::to_integer<char>(datagram[3]), '1');
  EXPECT_EQ(std::to_integer<uint8_t>(datagram[4]), kPacketVersion);
  EXPECT_EQ(std::to_integer<uint8_t>(datagram[5]), 1);  // DATA
  EXPECT_EQ(kernels::wire::load<uint64_t>(&datagram[8]), 7u);
  EXPECT_EQ(kernels::wire::load<uint32_t>(&datagram[16]), 1u);
  EXPECT_EQ(kernels::wire::load<uint64_t>(&datagram[24]), 0xB1u);
  EXPECT_EQ(kernels::wire::load<uint64_t>(&datagram[32]), 0xA1u);
  EXPECT_EQ(std::to_integer<uint8_t>(datagram[40]), 0x88);
  EXPECT_EQ(kernels::wire::load<uint32_t>(&datagram[64]), 5u);
  EXPECT_EQ(kernels::wire::load<uint32_t>(&datagram[73]),
            kernels::crc32c(std::span<const std::byte>(datagram).first(73)));
  // A full payload and its headers fit a 1500-byte MTU with IPv4 (20) and UDP (8).
  EXPECT_EQ(data_packet_bytes(Config{}.payload_bytes) + 28, 1500u);
}

TEST(ReliablePacketTest, DataAndAckRoundTrip) {
  const auto payload = payload_of(1400, 2);
  const DataFields fields{41, 5, 3, 4};
  const Datagram data_datagram = data_packet(fields, payload);  // the view points into it
  Result<PacketView> data = decode_packet(data_datagram);
  ASSERT_TRUE(data.ok()) << data.status().to_string();
  EXPECT_EQ(data->type, PacketType::kData);
  EXPECT_EQ(data->header, kHeader);
  EXPECT_EQ(data->data, fields);
  EXPECT_TRUE(
      std::equal(payload.begin(), payload.end(), data->payload.begin(), data->payload.end()));

  const AckFields fields_ack = ack_with(10, 77, {{12, 14}, {20, 21}});
  const Datagram ack_datagram = ack_packet(fields_ack);
  EXPECT_EQ(ack_datagram.size(), 56u + 2 * 16u + 4u);
  Result<PacketView> ack = decode_packet(ack_datagram);
  ASSERT_TRUE(ack.ok()) << ack.status().to_string();
  EXPECT_EQ(ack->type, PacketType::kAck);
  EXPECT_EQ(ack->header, kHeader);
  EXPECT_EQ(ack->ack.cumulative, 10u);
  EXPECT_EQ(ack->ack.window, 77u);
  ASSERT_EQ(ack->ack.sack_count, 2u);
  EXPECT_EQ(ack->ack.sacks[0], (SackRange{12, 14}));
  EXPECT_EQ(ack->ack.sacks[1], (SackRange{20, 21}));
}

TEST(ReliablePacketTest, EncodersRefuseWhatDecodeWouldRefuse) {
  const auto payload = payload_of(10, 3);
  Datagram out(kMaxDatagramBytes);
  EXPECT_EQ(encode_data(kHeader, {0, 0, 1, 1}, payload, out).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(encode_data(kHeader, {0, 0, 0, 1}, {}, out).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(encode_data(kHeader, {0, 0, 0, 1}, payload, std::span(out).first(81)).status().code(),
            ErrorCode::kResourceExhausted);
  EXPECT_EQ(encode_ack(kHeader, ack_with(5, 1, {{5, 6}}), out).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(encode_ack(kHeader, ack_with(5, 1, {{6, 6}}), out).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(encode_ack(kHeader, ack_with(5, 1, {{8, 9}, {7, 8}}), out).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(encode_ack(kHeader, ack_with(5, 1, {{8, 9}}), std::span(out).first(60)).status().code(),
            ErrorCode::kResourceExhausted);
}

TEST(ReliablePacketTest, TruncatedAndLongDatagramsAreMalformed) {
  const Datagram valid = data_packet({1, 0, 0, 1}, payload_of(100, 4));
  for (std::size_t size = 0; size < valid.size(); ++size) {
    const Datagram truncated(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(size));
    const Status status = decode_packet(truncated).status();
    EXPECT_EQ(status.code(), ErrorCode::kMalformedFrame) << size << " bytes";
    EXPECT_FALSE(status.message().empty());
  }
  Datagram long_datagram = valid;
  long_datagram.push_back(std::byte{0});
  EXPECT_EQ(code_of(long_datagram), ErrorCode::kMalformedFrame);
  reseal(long_datagram);  // even with a CRC that covers the extra byte
  EXPECT_EQ(code_of(long_datagram), ErrorCode::kMalformedFrame);
  EXPECT_EQ(code_of(Datagram(kMaxDatagramBytes + 1)), ErrorCode::kMalformedFrame);
}

TEST(ReliablePacketTest, BadMagicVersionTypeReservedAndCrcAreRefused) {
  const Datagram valid = data_packet({1, 0, 0, 1}, payload_of(100, 5));
  const auto refused_with = [&](std::size_t at, uint8_t value) {
    Datagram bad = valid;
    bad[at] = std::byte{value};
    reseal(bad);
    const Status status = decode_packet(bad).status();
    return status.code() == ErrorCode::kMalformedFrame ? status.message() : status.to_string();
  };
  EXPECT_NE(refused_with(0, 'X').find("magic"), std::string::npos);
  EXPECT_NE(refused_with(4, kPacketVersion + 1).find("version"), std::string::npos);
  EXPECT_NE(refused_with(5, 3).find("type"), std::string::npos);
  EXPECT_NE(refused_with(6, 1).find("reserved"), std::string::npos);

  Datagram flipped = valid;
  flipped[100] ^= std::byte{0x10};  // in the payload
  const Status status = decode_packet(flipped).status();
  EXPECT_EQ(status.code(), ErrorCode::kChecksumMismatch);
  EXPECT_NE(status.message().find("CRC"), std::string::npos);
}

TEST(ReliablePacketTest, InconsistentFieldsAreMalformedEvenWithAGoodCrc) {
  const Datagram valid = data_packet({1, 0, 2, 3}, payload_of(100, 6));
  const auto with_u32 = [&](std::size_t at, uint32_t value) {
    Datagram bad = valid;
    kernels::wire::store(&bad[at], value);
    reseal(bad);
    return decode_packet(bad).status();
  };
  Status index = with_u32(56, 3);  // fragment 3 of 3
  EXPECT_EQ(index.code(), ErrorCode::kMalformedFrame);
  EXPECT_NE(index.message().find("fragment 3 of 3"), std::string::npos) << index.message();
  EXPECT_EQ(with_u32(60, 0).code(), ErrorCode::kMalformedFrame);  // a count of 0
  // Absurd payload lengths: the datagram holds fewer bytes than they say, or more.
  for (uint32_t length : {0u, 99u, 101u, 65536u, 0xFFFFFFFFu}) {
    const Status status = with_u32(64, length);
    EXPECT_EQ(status.code(), ErrorCode::kMalformedFrame) << length;
    EXPECT_FALSE(status.message().empty());
  }
  Datagram no_epoch = valid;
  kernels::wire::store<uint64_t>(&no_epoch[24], 0);
  reseal(no_epoch);
  EXPECT_NE(decode_packet(no_epoch).status().message().find("epoch"), std::string::npos);

  const Datagram ack = ack_packet(ack_with(10, 5, {{12, 14}, {20, 21}}));
  const auto ack_with_u64 = [&](std::size_t at, uint64_t value) {
    Datagram bad = ack;
    kernels::wire::store(&bad[at], value);
    reseal(bad);
    return decode_packet(bad).status().code();
  };
  EXPECT_EQ(ack_with_u64(56, 10), ErrorCode::kMalformedFrame);  // a range at the cumulative ack
  EXPECT_EQ(ack_with_u64(64, 12), ErrorCode::kMalformedFrame);  // an empty range
  EXPECT_EQ(ack_with_u64(72, 13), ErrorCode::kMalformedFrame);  // overlapping ranges
  Datagram many_ranges = ack;
  kernels::wire::store<uint32_t>(&many_ranges[52], 1000);
  reseal(many_ranges);
  EXPECT_EQ(code_of(many_ranges), ErrorCode::kMalformedFrame);
}

TEST(ReliablePacketTest, RandomByteFlipsAreAlwaysRefused) {
  std::vector<Datagram> valid = {
      data_packet({1, 0, 0, 1}, payload_of(1, 7)),
      data_packet({123456, 77, 5, 9}, payload_of(1400, 8)),
      ack_packet(ack_with(10, 5, {})),
      ack_packet(ack_with(10, 5, {{12, 14}, {20, 21}, {30, 40}})),
  };
  Prng prng(2024);
  std::set<ErrorCode> codes;
  for (int trial = 0; trial < 20000; ++trial) {
    Datagram damaged = valid[prng.below(valid.size())];
    std::set<uint64_t> positions;  // distinct: two flips of one byte could cancel out
    const uint64_t flips = 1 + prng.below(4);
    while (positions.size() < flips) positions.insert(prng.below(damaged.size()));
    for (uint64_t at : positions) damaged[at] ^= std::byte(1 + prng.below(255));
    if (prng.chance(0.1)) damaged.resize(prng.below(damaged.size() + 8));
    const Result<PacketView> decoded = decode_packet(damaged);
    ASSERT_FALSE(decoded.ok()) << "trial " << trial;
    const ErrorCode code = decoded.status().code();
    ASSERT_TRUE(code == ErrorCode::kMalformedFrame || code == ErrorCode::kChecksumMismatch)
        << decoded.status().to_string();
    codes.insert(code);
  }
  EXPECT_EQ(codes.size(), 2u) << "both refusals must occur";
}

// A session that has taken some packets, to check that refused datagrams change nothing.
class RefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Sequences 0 and 2 from rank 1 (1 missing): one message delivered, one held.
    ASSERT_TRUE(session_.on_datagram(from_peer({0, 0, 0, 1}), now_).ok());
    ASSERT_TRUE(session_.on_datagram(from_peer({2, 2, 0, 1}), now_).ok());
    ASSERT_TRUE(session_.take_ack(now_).has_value());
  }

  Datagram from_peer(const DataFields& fields, PacketHeader header = kHeader) {
    return data_packet(fields, payload_of(10, static_cast<uint8_t>(fields.sequence)), header);
  }

  void expect_unchanged() {
    EXPECT_EQ(session_.receiver().cumulative(), 1u);
    EXPECT_EQ(session_.receiver().counters().packets_received, 2u);
    EXPECT_EQ(session_.receiver().ready_messages(), 1u);
    EXPECT_EQ(session_.peer_epoch(), 0xB1u);
    EXPECT_FALSE(session_.receiver().ack_due(now_));
    EXPECT_TRUE(session_.status().ok());
    EXPECT_EQ(session_.counters().peer_restarts, 0u);
  }

  Clock::time_point now_ = Clock::time_point{} + std::chrono::hours(1);
  Session session_{fast_link_config(), {7, 0, 1, 0xA1}};
};

TEST_F(RefusalTest, ForeignDatagramsAreIncompatibleAndChangeNothing) {
  const std::vector<PacketHeader> foreign = {
      {8, 1, 0, 0xB1, 0xA1},  // another job
      {7, 1, 2, 0xB1, 0xA1},  // for another rank
      {7, 3, 0, 0xB1, 0xA1},  // from a rank that is not this session's peer
      {8, 1, 0, 0xC1, 0},     // another job, with an epoch that would look like a restart
  };
  for (const PacketHeader& header : foreign) {
    const Status status = session_.on_datagram(from_peer({1, 1, 0, 1}, header), now_);
    EXPECT_EQ(status.code(), ErrorCode::kIncompatible);
    EXPECT_NE(status.message().find("job"), std::string::npos) << status.message();
  }
  EXPECT_EQ(session_.counters().foreign, foreign.size());
  expect_unchanged();
}

TEST_F(RefusalTest, MalformedDatagramsAreRefusedAndChangeNothing) {
  Prng prng(99);
  const Datagram valid = from_peer({1, 1, 0, 1});
  uint64_t refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    Datagram damaged = valid;
    damaged[prng.below(damaged.size())] ^= std::byte(1 + prng.below(255));
    if (trial % 3 == 0) damaged.resize(prng.below(damaged.size()));
    const Status status = session_.on_datagram(damaged, now_);
    ASSERT_TRUE(status.code() == ErrorCode::kMalformedFrame ||
                status.code() == ErrorCode::kChecksumMismatch)
        << status.to_string();
    ++refused;
  }
  EXPECT_EQ(session_.counters().malformed, refused);
  expect_unchanged();
  // The real packet still fills the gap.
  ASSERT_TRUE(session_.on_datagram(valid, now_).ok());
  EXPECT_EQ(session_.receiver().cumulative(), 3u);
  EXPECT_EQ(session_.receiver().ready_messages(), 3u);
}

}  // namespace
}  // namespace gradgate::gateway::reliable::testing
