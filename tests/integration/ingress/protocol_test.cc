// The DECLARE_CUDA and ALLREDUCE_DONE messages on their own: what is encoded decodes to the same
// fields, and a body cut short or with bytes to spare does not decode.
#include <gtest/gtest.h>

#include <cstring>

#include "gradgate/ingress_protocol.h"

namespace gradgate::ingress_protocol {
namespace {

DeclareCuda sample() {
  DeclareCuda m;
  m.tensor.name = "ddp.bucket3";
  m.tensor.elements = 1 << 20;
  m.tensor.dtype = static_cast<uint8_t>(Dtype::kBf16);
  m.tensor.rows = 1024;
  m.tensor.cols = 1024;
  m.tensor.data_volume = 50000.0;
  for (size_t i = 0; i < m.buffer.device_uuid.size(); ++i) {
    m.buffer.device_uuid[i] = static_cast<std::byte>(0xa0 + i);
  }
  for (size_t i = 0; i < m.buffer.memory_handle.size(); ++i) {
    m.buffer.memory_handle[i] = static_cast<std::byte>(i);
    m.buffer.ready_event_handle[i] = static_cast<std::byte>(255 - i);
  }
  m.buffer.offset = (uint64_t{1} << 33) + 512;
  return m;
}

TEST(DeclareCudaMessage, RoundTrips) {
  const DeclareCuda sent = sample();
  const auto packet = encode(77, sent);
  ASSERT_LE(packet.size(), kMaxPacketBytes);
  // The DECLARE fields, then 16 + 64 + 8 + 64 bytes.
  EXPECT_EQ(packet.size(), encode(77, sent.tensor).size() + 152);
  const auto header = decode_header(packet);
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(header->type, MessageType::kDeclareCuda);
  EXPECT_EQ(static_cast<uint16_t>(header->type), 4);
  EXPECT_EQ(header->request_id, 77u);
  const auto got = decode_body<DeclareCuda>(packet);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tensor.name, sent.tensor.name);
  EXPECT_EQ(got->tensor.elements, sent.tensor.elements);
  EXPECT_EQ(got->tensor.dtype, sent.tensor.dtype);
  EXPECT_EQ(got->tensor.rows, sent.tensor.rows);
  EXPECT_EQ(got->tensor.cols, sent.tensor.cols);
  EXPECT_EQ(got->tensor.data_volume, sent.tensor.data_volume);
  EXPECT_EQ(got->buffer, sent.buffer);
  EXPECT_EQ(check_declare(got->tensor), "");
}

TEST(DeclareCudaMessage, LongestNameFitsAPacket) {
  DeclareCuda m = sample();
  m.tensor.name.assign(kMaxNameBytes, 'n');
  const auto packet = encode(1, m);
  EXPECT_LE(packet.size(), kMaxPacketBytes);
  const auto got = decode_body<DeclareCuda>(packet);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tensor.name, m.tensor.name);
}

TEST(DeclareCudaMessage, TruncatedBodiesDoNotDecode) {
  const auto packet = encode(1, sample());
  for (size_t size = 0; size < packet.size(); ++size) {
    const std::span<const std::byte> cut(packet.data(), size);
    EXPECT_FALSE(decode_body<DeclareCuda>(cut).has_value()) << size << " bytes";
  }
}

TEST(DeclareCudaMessage, ExtraBytesDoNotDecode) {
  auto packet = encode(1, sample());
  packet.push_back(std::byte{0});
  EXPECT_FALSE(decode_body<DeclareCuda>(packet).has_value());
  // Nor does a host DECLARE decode as DECLARE_CUDA, or the other way round.
  EXPECT_FALSE(decode_body<DeclareCuda>(encode(1, sample().tensor)).has_value());
  EXPECT_FALSE(decode_body<Declare>(encode(1, sample())).has_value());
}

AllreduceDone done_sample() {
  AllreduceDone m;
  m.status = 0;
  m.step = 41;
  m.raw_bytes = 4096;
  m.wire_bytes = 96;
  m.encode_seconds = 0.25;
  m.communicate_seconds = 0.5;
  m.decode_seconds = 0.125;
  m.codec = 5;
  return m;
}

TEST(AllreduceDoneMessage, RoundTripsWithTheCodecOrWithoutIt) {
  AllreduceDone sent = done_sample();
  const auto with_codec = encode(9, sent);
  const auto got = decode_body<AllreduceDone>(with_codec);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->step, 41u);
  EXPECT_EQ(got->wire_bytes, 96u);
  EXPECT_EQ(got->decode_seconds, 0.125);
  EXPECT_EQ(got->codec, std::optional<uint8_t>(5));
  sent.codec.reset();  // as the gateway answers a client older than kFirstVersionWithCodec
  const auto without = encode(9, sent, kFirstVersionWithCodec - 1);
  EXPECT_EQ(without.size() + 1, with_codec.size());
  const auto old = decode_body<AllreduceDone>(without);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->step, 41u);
  EXPECT_FALSE(old->codec.has_value());
}

TEST(AllreduceDoneMessage, TruncatedOrLongerBodiesDoNotDecode) {
  auto packet = encode(1, done_sample());
  // Cut by the codec alone it is a reply of the version before; cut further, nothing.
  for (size_t size = 0; size + 1 < packet.size(); ++size) {
    const std::span<const std::byte> cut(packet.data(), size);
    EXPECT_FALSE(decode_body<AllreduceDone>(cut).has_value()) << size << " bytes";
  }
  packet.push_back(std::byte{0});
  EXPECT_FALSE(decode_body<AllreduceDone>(packet).has_value());
}

}  // namespace
}  // namespace gradgate::ingress_protocol
