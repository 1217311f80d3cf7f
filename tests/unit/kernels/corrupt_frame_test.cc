// Corrupted frames: every bit flip and truncation is caught by parse_frame, and a corrupted payload
// whose CRC was recomputed (a buggy or hostile sender) is either rejected by the decoder without
// touching the accumulator, or decodes to finite values. Frames live in buffers of exactly their
// size, so a sanitizer build catches any read past the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codec_test_util.h"
#include "corrupt_frame_util.h"
#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/frame.h"

namespace gradgate::kernels {
namespace {

using corrupt::Fixture;
using corrupt::kCodecAt;
using corrupt::kCrcAt;
using corrupt::kElementCountAt;
using corrupt::kFlagsAt;
using corrupt::kInf;
using corrupt::kNaN;
using corrupt::kPayloadBytesAt;
using corrupt::kRoundAt;
using corrupt::kVersionAt;
using corrupt::load;
using corrupt::make_fixture;
using corrupt::parse_and_decode;
using corrupt::store;
using test_util::Bytes;

uint64_t seed_of(const std::string& text) {  // FNV-1a: the same on every platform
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : text) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return h;
}

class CorruptFrameTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    // Odd sizes: sign has padding bits, the loops run their scalar tails.
    fixture_ = make_fixture(GetParam(), 25, 41);
    ASSERT_NE(fixture_.codec, nullptr);
    ASSERT_FALSE(fixture_.frame.empty());
    ASSERT_TRUE(parse_frame(fixture_.frame).ok());
    rng_.seed(seed_of(GetParam()));
  }

  size_t random_below(size_t bound) { return static_cast<size_t>(rng_() % bound); }

  Fixture fixture_;
  std::mt19937_64 rng_;
};

// One, two or three flipped bits anywhere, or a burst of up to 32 bits: CRC32C detects every such
// error in frames of this size, so none may pass.
TEST_P(CorruptFrameTest, BitFlipsAreRejectedByParse) {
  const Bytes& valid = fixture_.frame;
  constexpr int kTrials = 2000;
  int rejected = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    Bytes frame = valid;
    if (trial % 4 == 3) {  // burst: up to 4 consecutive bytes xor a non-zero pattern
      const size_t len = 1 + random_below(std::min<size_t>(4, frame.size()));
      const size_t at = random_below(frame.size() - len + 1);
      for (size_t i = 0; i < len; ++i) {
        const auto x = static_cast<uint8_t>(i == 0 ? 1 + random_below(255) : random_below(256));
        frame[at + i] ^= std::byte{x};
      }
    } else {
      std::set<size_t> bits;  // distinct, so no two flips cancel
      const size_t count = 1 + static_cast<size_t>(trial % 3);
      while (bits.size() < count) bits.insert(random_below(frame.size() * 8));
      for (const size_t bit : bits)
        frame[bit / 8] ^= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
    }
    auto parsed = parse_frame(frame);
    if (!parsed.ok()) {
      ++rejected;
      const ErrorCode code = parsed.status().code();
      EXPECT_TRUE(code == ErrorCode::kChecksumMismatch || code == ErrorCode::kMalformedFrame)
          << parsed.status().to_string();
    }
  }
  EXPECT_EQ(rejected, kTrials);
}

TEST_P(CorruptFrameTest, TruncationsAndExtensionsAreRejectedByParse) {
  const Bytes& valid = fixture_.frame;
  std::vector<size_t> lengths;
  if (valid.size() <= 8192) {
    for (size_t len = 0; len < valid.size(); ++len) lengths.push_back(len);
  } else {
    for (int i = 0; i < 500; ++i) lengths.push_back(random_below(valid.size()));
  }
  for (const size_t extra : {1, 3, 8}) lengths.push_back(valid.size() + extra);
  size_t rejected = 0;
  for (const size_t len : lengths) {
    Bytes frame(valid.begin(), valid.begin() + static_cast<ptrdiff_t>(std::min(len, valid.size())));
    frame.resize(len, std::byte{0});
    auto parsed = parse_frame(frame);
    if (!parsed.ok()) {
      ++rejected;
      EXPECT_EQ(parsed.status().code(), ErrorCode::kMalformedFrame) << "length " << len;
    }
  }
  EXPECT_EQ(rejected, lengths.size());
}

// The payload (or a header field) changed and the CRC recomputed over the changed bytes.
TEST_P(CorruptFrameTest, ResealedCorruptionsAreRejectedOrDecodeFinite) {
  const Bytes& valid = fixture_.frame;
  constexpr int kTrials = 2000;
  const float kSpecials[] = {kNaN, kInf, -kInf, 3.4e38f, -1.0f, 0.0f, 1e-45f};
  int parse_rejected = 0, decode_rejected = 0, accepted = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    Bytes frame = valid;
    const bool header = trial % 5 == 0 || frame.size() == kFrameHeaderBytes;
    const size_t begin = header ? 4 : kFrameHeaderBytes;  // header: keep the magic
    const size_t end = header ? kCrcAt : frame.size();
    switch (trial % 3) {
      case 0:  // flip 1 to 4 bits
        for (size_t k = 0, flips = 1 + random_below(4); k < flips; ++k) {
          frame[begin + random_below(end - begin)] ^=
              std::byte{static_cast<uint8_t>(1u << random_below(8))};
        }
        break;
      case 1:  // overwrite a byte
        frame[begin + random_below(end - begin)] =
            std::byte{static_cast<uint8_t>(random_below(256))};
        break;
      default:  // a special float at a 4-byte boundary of the region
        if (end - begin >= 4) {
          const size_t at = begin + 4 * random_below((end - begin) / 4);
          store<float>(frame, at, kSpecials[random_below(std::size(kSpecials))]);
        }
        break;
    }
    test_util::reseal_crc(frame);
    if (!parse_frame(frame).ok()) {
      ++parse_rejected;
      continue;
    }
    if (parse_and_decode(fixture_, frame).ok()) {
      ++accepted;
    } else {
      ++decode_rejected;
    }
  }
  EXPECT_EQ(parse_rejected + decode_rejected + accepted, kTrials);
  RecordProperty("parse_rejected", parse_rejected);
  RecordProperty("decode_rejected", decode_rejected);
  RecordProperty("accepted", accepted);
}

// Header corruptions with a valid CRC, and plain CRC mismatches, for every codec.
TEST_P(CorruptFrameTest, MalformedHeadersAreRejected) {
  const Fixture& f = fixture_;
  struct Case {
    std::string name;
    std::function<void(Bytes&)> mutate;
    ErrorCode expected;
    bool reseal = true;
  };
  const int rounds = f.codec->rounds();
  const std::vector<Case> cases = {
      {"element count 0", [](Bytes& b) { store<uint64_t>(b, kElementCountAt, 0); },
       ErrorCode::kMalformedFrame},
      {"element count 2^32", [](Bytes& b) { store<uint64_t>(b, kElementCountAt, 1ull << 32); },
       ErrorCode::kMalformedFrame},
      {"element count 2^64-1", [](Bytes& b) { store<uint64_t>(b, kElementCountAt, ~0ull); },
       ErrorCode::kMalformedFrame},
      {"codec id 200", [](Bytes& b) { store<uint8_t>(b, kCodecAt, 200); },
       ErrorCode::kMalformedFrame},
      {"codec id 8", [](Bytes& b) { store<uint8_t>(b, kCodecAt, kCodecCount); },
       ErrorCode::kMalformedFrame},
      {"another codec's id",
       [&](Bytes& b) {
         store<uint8_t>(b, kCodecAt,
                        static_cast<uint8_t>((static_cast<int>(f.codec->id()) + 1) % kCodecCount));
       },
       ErrorCode::kIncompatible},
      {"wrong magic", [](Bytes& b) { b[0] ^= std::byte{0x20}; }, ErrorCode::kMalformedFrame},
      {"version 0", [](Bytes& b) { store<uint8_t>(b, kVersionAt, 0); }, ErrorCode::kMalformedFrame},
      {"version 2", [](Bytes& b) { store<uint8_t>(b, kVersionAt, kFrameVersion + 1); },
       ErrorCode::kMalformedFrame},
      {"payload length beyond the buffer",
       [](Bytes& b) {
         store<uint32_t>(b, kPayloadBytesAt, load<uint32_t>(b, kPayloadBytesAt) + 1);
       },
       ErrorCode::kMalformedFrame},
      {"payload length 2^32-1", [](Bytes& b) { store<uint32_t>(b, kPayloadBytesAt, ~0u); },
       ErrorCode::kMalformedFrame},
      {"payload length short of the buffer",
       [](Bytes& b) {
         store<uint32_t>(b, kPayloadBytesAt, load<uint32_t>(b, kPayloadBytesAt) - 1);
       },
       ErrorCode::kMalformedFrame},
      {"round out of range",
       [&](Bytes& b) { store<uint8_t>(b, kRoundAt, static_cast<uint8_t>(rounds)); },
       ErrorCode::kMalformedFrame},
      {"unknown flag bit", [](Bytes& b) { b[kFlagsAt] |= std::byte{0x80}; },
       ErrorCode::kMalformedFrame},
      {"payload bit flipped, CRC stale", [](Bytes& b) { b.back() ^= std::byte{0x01}; },
       ErrorCode::kChecksumMismatch, false},
      {"header bit flipped, CRC stale", [](Bytes& b) { b[12] ^= std::byte{0x10}; },
       ErrorCode::kChecksumMismatch, false},
      {"CRC bit flipped", [](Bytes& b) { b[kCrcAt + 3] ^= std::byte{0x80}; },
       ErrorCode::kChecksumMismatch, false},
  };
  ASSERT_EQ(peek_frame_header(f.frame)->codec, f.codec->id());
  size_t rejected = 0;
  for (const Case& c : cases) {
    Bytes frame = f.frame;
    c.mutate(frame);
    if (c.reseal) test_util::reseal_crc(frame);
    const Status st = parse_and_decode(f, frame);
    EXPECT_EQ(st.code(), c.expected) << c.name << ": " << st.to_string();
    rejected += st.code() == c.expected;
  }
  EXPECT_EQ(rejected, cases.size());
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, CorruptFrameTest, ::testing::ValuesIn(test_util::codec_specs()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return test_util::spec_test_name(param_info.param);
                         });

}  // namespace
}  // namespace gradgate::kernels
