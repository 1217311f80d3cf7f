// The wire frame (frame.h): header layout, sealing and parsing, header peeking, stream checks,
// codec names, and the CRC32C behind them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gradgate/base/status.h"
#include "gradgate/kernels/crc32c.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/wire_io.h"

namespace gradgate::kernels {
namespace {

using Bytes = std::vector<std::byte>;

// A header with a distinct, multi-byte value in every field.
FrameHeader sample_header(CodecId codec, uint32_t payload_bytes) {
  FrameHeader h;
  h.codec = codec;
  h.round = 1;
  h.flags = 0xA5;
  h.tensor_id = 0x11223344;
  h.job_id = 0x55667788;
  h.step = 0x0102030405060708ull;
  h.element_count = 0xFFFFFFFFull;
  h.policy_version = 0x99AABBCC;
  h.param = 0xDDEEFF01;
  h.payload_bytes = payload_bytes;
  return h;
}

// A sealed frame of `header` with payload bytes 0, 1, 2, ...
Bytes sealed_frame(const FrameHeader& header) {
  Bytes frame(kFrameHeaderBytes + header.payload_bytes);
  for (size_t i = 0; i < header.payload_bytes; ++i) {
    frame[kFrameHeaderBytes + i] = std::byte{static_cast<uint8_t>(i * 7 + 1)};
  }
  seal_frame(header, frame);
  return frame;
}

void expect_same_header(const FrameHeader& a, const FrameHeader& b) {
  EXPECT_EQ(a.codec, b.codec);
  EXPECT_EQ(a.round, b.round);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.tensor_id, b.tensor_id);
  EXPECT_EQ(a.job_id, b.job_id);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.element_count, b.element_count);
  EXPECT_EQ(a.policy_version, b.policy_version);
  EXPECT_EQ(a.param, b.param);
  EXPECT_EQ(a.payload_bytes, b.payload_bytes);
}

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

TEST(FrameTest, SealThenParseRoundTripsEveryHeaderField) {
  for (int id = 0; id < kCodecCount; ++id) {
    for (const uint32_t payload : {0u, 1u, 13u, 64u}) {
      const FrameHeader header = sample_header(static_cast<CodecId>(id), payload);
      const Bytes frame = sealed_frame(header);
      auto parsed = parse_frame(frame);
      ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
      expect_same_header(parsed->header, header);
      EXPECT_EQ(parsed->payload.data(), frame.data() + kFrameHeaderBytes);
      EXPECT_EQ(parsed->payload.size(), payload);
    }
  }
}

TEST(FrameTest, SealWritesTheDocumentedLittleEndianLayout) {
  const FrameHeader h = sample_header(CodecId::kTopk, 5);
  const Bytes frame = sealed_frame(h);
  const auto at = [&](size_t offset, auto type_tag) {
    return wire::load<decltype(type_tag)>(frame.data() + offset);
  };
  EXPECT_EQ(std::memcmp(frame.data(), "GGF1", 4), 0);
  EXPECT_EQ(at(0, uint32_t{}), kFrameMagic);
  EXPECT_EQ(at(4, uint8_t{}), kFrameVersion);
  EXPECT_EQ(at(5, uint8_t{}), 5);
  EXPECT_EQ(at(6, uint8_t{}), h.round);
  EXPECT_EQ(at(7, uint8_t{}), h.flags);
  EXPECT_EQ(at(8, uint32_t{}), h.tensor_id);
  EXPECT_EQ(at(12, uint32_t{}), h.job_id);
  EXPECT_EQ(at(16, uint64_t{}), h.step);
  EXPECT_EQ(at(24, uint64_t{}), h.element_count);
  EXPECT_EQ(at(32, uint32_t{}), h.policy_version);
  EXPECT_EQ(at(36, uint32_t{}), h.param);
  EXPECT_EQ(at(40, uint32_t{}), h.payload_bytes);
  EXPECT_EQ(frame[8], std::byte{0x44}) << "little-endian";
  // The CRC covers bytes [0, 44) and the payload.
  const uint32_t crc = crc32c_extend(crc32c(std::span(frame).first(44)),
                                     std::span(frame).subspan(kFrameHeaderBytes));
  EXPECT_EQ(at(44, uint32_t{}), crc);
}

TEST(FrameTest, SealIgnoresBytesBeyondThePayload) {
  FrameHeader h = sample_header(CodecId::kNone, 8);
  Bytes frame(kFrameHeaderBytes + 8 + 16, std::byte{0x3C});
  seal_frame(h, frame);
  const uint32_t crc = wire::load<uint32_t>(frame.data() + 44);
  frame.back() = std::byte{0x00};  // beyond the payload: not covered
  seal_frame(h, frame);
  EXPECT_EQ(wire::load<uint32_t>(frame.data() + 44), crc);
  frame.resize(kFrameHeaderBytes + 8);
  EXPECT_TRUE(parse_frame(frame).ok());
}

TEST(FrameTest, ParseRejectsEveryBitFlipOfASmallFrame) {
  const Bytes valid = sealed_frame(sample_header(CodecId::kSign, 20));
  for (size_t bit = 0; bit < valid.size() * 8; ++bit) {
    Bytes frame = valid;
    frame[bit / 8] ^= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
    EXPECT_FALSE(parse_frame(frame).ok()) << "bit " << bit;
  }
}

TEST(FrameTest, ParseReportsChecksumMismatchForPayloadChange) {
  Bytes frame = sealed_frame(sample_header(CodecId::kNone, 16));
  frame[kFrameHeaderBytes + 3] ^= std::byte{0x40};
  auto parsed = parse_frame(frame);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), ErrorCode::kChecksumMismatch);
}

TEST(FrameTest, ParseRequiresExactlyOneFrame) {
  const Bytes valid = sealed_frame(sample_header(CodecId::kBf16, 12));
  for (const size_t size :
       {size_t{0}, size_t{47}, size_t{48}, valid.size() - 1, valid.size() + 1}) {
    Bytes frame(valid.begin(),
                valid.begin() + static_cast<ptrdiff_t>(std::min(size, valid.size())));
    frame.resize(size);
    auto parsed = parse_frame(frame);
    ASSERT_FALSE(parsed.ok()) << size;
    EXPECT_EQ(parsed.status().code(), ErrorCode::kMalformedFrame) << size;
  }
}

TEST(FrameTest, ParseAcceptsTheElementCountBounds) {
  for (const uint64_t count : {uint64_t{1}, kMaxFrameElements}) {
    FrameHeader h = sample_header(CodecId::kQsgd, 4);
    h.element_count = count;
    auto parsed = parse_frame(sealed_frame(h));
    ASSERT_TRUE(parsed.ok()) << count;
    EXPECT_EQ(parsed->header.element_count, count);
  }
}

// Header faults with a correct CRC: what parse_frame and peek_frame_header both see.
struct HeaderFault {
  const char* name;
  size_t offset;
  uint64_t value;
  size_t width;
};

class HeaderFaultTest : public ::testing::TestWithParam<HeaderFault> {};

TEST_P(HeaderFaultTest, ParseAndPeekRejectWithMalformedFrame) {
  const HeaderFault fault = GetParam();
  Bytes frame = sealed_frame(sample_header(CodecId::kFp16, 8));
  std::memcpy(frame.data() + fault.offset, &fault.value, fault.width);
  const uint32_t crc = crc32c_extend(crc32c(std::span(frame).first(44)),
                                     std::span(frame).subspan(kFrameHeaderBytes));
  wire::store<uint32_t>(frame.data() + 44, crc);
  auto parsed = parse_frame(frame);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), ErrorCode::kMalformedFrame) << parsed.status().to_string();
  auto peeked = peek_frame_header(std::span(frame).first(kFrameHeaderBytes));
  ASSERT_FALSE(peeked.ok());
  EXPECT_EQ(peeked.status().code(), ErrorCode::kMalformedFrame);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, HeaderFaultTest,
    ::testing::Values(HeaderFault{"magic", 0, 0x32464747, 4}, HeaderFault{"version0", 4, 0, 1},
                      HeaderFault{"version2", 4, 2, 1}, HeaderFault{"codec8", 5, 8, 1},
                      HeaderFault{"codec200", 5, 200, 1}, HeaderFault{"count0", 24, 0, 8},
                      HeaderFault{"count2pow32", 24, uint64_t{1} << 32, 8},
                      HeaderFault{"countmax", 24, ~uint64_t{0}, 8}),
    [](const ::testing::TestParamInfo<HeaderFault>& param_info) { return param_info.param.name; });

TEST(FrameTest, PeekReadsTheHeaderWithoutPayloadOrChecksum) {
  const FrameHeader h = sample_header(CodecId::kRandomk, 100);
  Bytes frame = sealed_frame(h);
  frame[44] ^= std::byte{0xFF};  // peek does not check the CRC
  auto peeked = peek_frame_header(std::span(frame).first(kFrameHeaderBytes));
  ASSERT_TRUE(peeked.ok()) << peeked.status().to_string();
  expect_same_header(*peeked, h);
  auto short_header = peek_frame_header(std::span(frame).first(kFrameHeaderBytes - 1));
  ASSERT_FALSE(short_header.ok());
  EXPECT_EQ(short_header.status().code(), ErrorCode::kMalformedFrame);
}

TEST(FrameTest, CheckSameStreamComparesTheStreamFields) {
  const FrameHeader base = sample_header(CodecId::kQsgd, 16);
  EXPECT_TRUE(check_same_stream(base, base).ok());

  // Fields that are not part of the stream's identity may differ.
  FrameHeader other = base;
  other.flags = 0;
  other.param = 7;
  other.payload_bytes = 3;
  EXPECT_TRUE(check_same_stream(base, other).ok());

  const std::vector<std::pair<const char*, void (*)(FrameHeader&)>> changes = {
      {"codec", [](FrameHeader& h) { h.codec = CodecId::kSign; }},
      {"round", [](FrameHeader& h) { h.round = 0; }},
      {"tensor", [](FrameHeader& h) { h.tensor_id ^= 1; }},
      {"job", [](FrameHeader& h) { h.job_id ^= 1; }},
      {"step", [](FrameHeader& h) { h.step += 1; }},
      {"element count", [](FrameHeader& h) { h.element_count -= 1; }},
      {"policy version", [](FrameHeader& h) { h.policy_version += 1; }},
  };
  for (const auto& [name, change] : changes) {
    FrameHeader changed = base;
    change(changed);
    const Status st = check_same_stream(base, changed);
    EXPECT_EQ(st.code(), ErrorCode::kIncompatible) << name;
    EXPECT_EQ(check_same_stream(changed, base).code(), ErrorCode::kIncompatible) << name;
  }
}

TEST(FrameTest, CodecNamesRoundTrip) {
  const char* names[] = {"none", "fp16", "bf16", "qsgd", "sign", "topk", "randomk", "powersgd"};
  ASSERT_EQ(std::size(names), static_cast<size_t>(kCodecCount));
  for (int id = 0; id < kCodecCount; ++id) {
    const auto codec = static_cast<CodecId>(id);
    EXPECT_EQ(codec_name(codec), names[id]);
    auto back = codec_from_name(codec_name(codec));
    ASSERT_TRUE(back.ok()) << names[id];
    EXPECT_EQ(*back, codec);
  }
  EXPECT_EQ(codec_name(static_cast<CodecId>(kCodecCount)), "unknown");
  EXPECT_EQ(codec_name(static_cast<CodecId>(255)), "unknown");
}

TEST(FrameTest, UnknownCodecNamesAreRejected) {
  for (const char* name : {"", "unknown", "gzip", "topk:density=0.1", "fp32", " none", "none "}) {
    auto id = codec_from_name(name);
    ASSERT_FALSE(id.ok()) << "'" << name << "'";
    EXPECT_EQ(id.status().code(), ErrorCode::kInvalidArgument);
  }
}

// Bitwise CRC32C (reflected Castagnoli polynomial): the reference for the library's table and
// SSE4.2 paths.
uint32_t reference_crc32c(std::span<const std::byte> data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const std::byte b : data) {
    crc ^= static_cast<uint8_t>(b);
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(crc32c(bytes_of("123456789")), 0xE3069283u);
  EXPECT_EQ(crc32c({}), 0u);
  // RFC 3720 (iSCSI), appendix B.4.
  Bytes zeros(32, std::byte{0x00}), ones(32, std::byte{0xFF}), up(32), down(32);
  for (size_t i = 0; i < 32; ++i) {
    up[i] = std::byte{static_cast<uint8_t>(i)};
    down[i] = std::byte{static_cast<uint8_t>(31 - i)};
  }
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
}

TEST(Crc32cTest, MatchesBitwiseReferenceAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  Bytes data(300);
  for (auto& b : data) b = std::byte{static_cast<uint8_t>(rng())};
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t len = 0; len + offset <= 200; ++len) {
      const auto piece = std::span(data).subspan(offset, len);
      ASSERT_EQ(crc32c(piece), reference_crc32c(piece)) << "offset " << offset << " length " << len;
    }
  }
}

TEST(Crc32cTest, MatchesBitwiseReferenceOnBuffersOfSeveralInterleavedBlocks) {
  std::mt19937 rng(13);
  Bytes data(3 * 3 * 8192 + 77);
  for (auto& b : data) b = std::byte{static_cast<uint8_t>(rng())};
  for (size_t len : {size_t{3 * 8192 - 1}, size_t{3 * 8192}, size_t{3 * 8192 + 13},
                     size_t{2 * 3 * 8192 + 8}, data.size() - 5}) {
    for (size_t offset : {0, 3}) {
      const auto piece = std::span(data).subspan(offset, len);
      ASSERT_EQ(crc32c(piece), reference_crc32c(piece)) << "offset " << offset << " length " << len;
    }
  }
}

TEST(Crc32cTest, ExtendOverSplitBuffersEqualsWhole) {
  std::mt19937 rng(11);
  Bytes data(257);
  for (auto& b : data) b = std::byte{static_cast<uint8_t>(rng())};
  const uint32_t whole = crc32c(data);
  for (size_t split = 0; split <= data.size(); ++split) {
    const auto all = std::span(data);
    ASSERT_EQ(crc32c_extend(crc32c(all.first(split)), all.subspan(split)), whole) << split;
  }
  // Three pieces, including empty ones.
  const auto all = std::span(data);
  EXPECT_EQ(crc32c_extend(crc32c_extend(crc32c(all.first(9)), all.subspan(9, 0)), all.subspan(9)),
            whole);
}

}  // namespace
}  // namespace gradgate::kernels
