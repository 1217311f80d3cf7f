// Corrupted payloads, targeted: for each codec, hand-built payload changes with the CRC resealed
// (a buggy or hostile sender) that the decoder must reject with the expected error without
// touching the accumulator, and positive controls that show such a payload is read as intended.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "codec_test_util.h"
#include "corrupt_frame_util.h"
#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/half.h"
#include "gradgate/kernels/wire_io.h"

namespace gradgate::kernels {
namespace {

using corrupt::Fixture;
using corrupt::kElementCountAt;
using corrupt::kFlagsAt;
using corrupt::kInf;
using corrupt::kNaN;
using corrupt::kParamAt;
using corrupt::kPayloadBytesAt;
using corrupt::kRoundAt;
using corrupt::load;
using corrupt::make_fixture;
using corrupt::parse_and_decode;
using corrupt::replace_payload;
using corrupt::store;
using test_util::Bytes;

// A named change to a valid frame that the decoder must reject with `expected`.
struct Mutation {
  std::string name;
  std::function<void(Bytes&)> mutate;
  ErrorCode expected = ErrorCode::kMalformedFrame;
};

// Applies each mutation to a copy of f.frame, reseals the CRC and requires the expected error
// (from parse or decode) with the accumulator untouched; counts them to be sure all ran.
void expect_all_rejected(const Fixture& f, const std::vector<Mutation>& mutations) {
  ASSERT_NE(f.codec, nullptr);
  size_t rejected = 0;
  for (const Mutation& m : mutations) {
    Bytes frame = f.frame;
    m.mutate(frame);
    test_util::reseal_crc(frame);
    const Status st = parse_and_decode(f, frame);
    EXPECT_EQ(st.code(), m.expected) << m.name << ": " << st.to_string();
    rejected += st.code() == m.expected;
  }
  EXPECT_EQ(rejected, mutations.size());
}

// Decodes the frame after `mutate` (resealed) and returns the accumulator growth: the positive
// controls that show a hand-built payload is read as intended.
std::vector<float> decode_delta(const Fixture& f, const std::function<void(Bytes&)>& mutate) {
  Bytes frame = f.frame;
  mutate(frame);
  test_util::reseal_crc(frame);
  auto view = parse_frame(frame);
  EXPECT_TRUE(view.ok()) << view.status().to_string();
  std::vector<float> acc(f.elements, 0.0f);
  if (!view.ok()) return acc;
  const Status st = f.codec->decode_accumulate(*view, f.stream.get(), acc);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return acc;
}

void append_bytes(Bytes& out, std::initializer_list<uint8_t> bytes) {
  for (const uint8_t b : bytes) out.push_back(std::byte{b});
}

void append_f32(Bytes& out, std::initializer_list<float> values) {
  for (const float v : values) {
    const size_t at = out.size();
    out.resize(at + 4);
    wire::store<float>(out.data() + at, v);
  }
}

// topk payload: [u32 count][u32 index_bytes][index bytes][values]; flags bit 0 bitmap, bit 1 fp16.
Bytes topk_payload(uint32_t count, const Bytes& indices, const Bytes& values) {
  Bytes p(8 + indices.size() + values.size());
  wire::store<uint32_t>(p.data(), count);
  wire::store<uint32_t>(p.data() + 4, static_cast<uint32_t>(indices.size()));
  std::copy(indices.begin(), indices.end(), p.begin() + 8);
  std::copy(values.begin(), values.end(), p.begin() + 8 + static_cast<ptrdiff_t>(indices.size()));
  return p;
}

Bytes f32_values(std::initializer_list<float> values) {
  Bytes out;
  append_f32(out, values);
  return out;
}

// A topk payload with fp32 values and the index bytes given as they go on the wire.
Bytes topk_raw_varints(uint32_t count, std::initializer_list<uint8_t> index_bytes,
                       std::initializer_list<float> values) {
  Bytes indices;
  append_bytes(indices, index_bytes);
  return topk_payload(count, indices, f32_values(values));
}

// A topk payload with fp32 values and the index gaps LEB128-encoded.
Bytes topk_gaps(uint32_t count, std::initializer_list<uint64_t> gaps,
                std::initializer_list<float> values) {
  Bytes indices;
  for (uint64_t gap : gaps) {
    for (; gap >= 0x80; gap >>= 7) indices.push_back(std::byte{static_cast<uint8_t>(gap | 0x80)});
    indices.push_back(std::byte{static_cast<uint8_t>(gap)});
  }
  return topk_payload(count, indices, f32_values(values));
}

constexpr size_t kTargetedElements = 1001;  // the 7 x 143 tensor of the targeted tests: n % 8 == 1

TEST(CorruptFrameTargeted, TopkVarintPayloads) {
  const Fixture f = make_fixture("topk:density=0.01", 7, 143);
  ASSERT_EQ(f.elements, kTargetedElements);
  const auto with = [](Bytes payload) {
    return [payload](Bytes& b) {
      store<uint8_t>(b, kFlagsAt, 0);
      replace_payload(b, payload);
    };
  };
  // Control: gaps 3 and 5 select elements 3 and 9.
  const auto delta = decode_delta(f, with(topk_gaps(2, {3, 5}, {1.5f, -2.0f})));
  EXPECT_EQ(delta[3], 1.5f);
  EXPECT_EQ(delta[9], -2.0f);

  expect_all_rejected(
      f, {
             {"index n", with(topk_gaps(1, {kTargetedElements}, {1.0f}))},
             {"second index n", with(topk_gaps(2, {kTargetedElements - 1, 0}, {1, 2}))},
             {"index 2^32-1", with(topk_gaps(1, {0xFFFFFFFFu}, {1.0f}))},
             {"indices wrapping to 0 in 32 bits",
              with(topk_gaps(2, {500, (1ull << 32) - 501}, {1, 2}))},
             {"varint of 6 bytes",
              with(topk_raw_varints(1, {0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, {1.0f}))},
             {"truncated varint", with(topk_raw_varints(2, {3, 0x85}, {1, 2}))},
             {"count above the indices", with(topk_gaps(3, {3, 5}, {1, 2, 3}))},
             {"count below the indices", with(topk_gaps(1, {3, 5}, {1}))},
             {"count above n", with(topk_gaps(kTargetedElements + 1, {3}, {1}))},
             {"values one byte short", with(topk_payload(1, Bytes{std::byte{3}}, Bytes(3)))},
             {"payload shorter than its prefix", with(Bytes(7))},
             {"NaN value", with(topk_gaps(2, {3, 5}, {1.0f, kNaN}))},
             {"infinite value", with(topk_gaps(1, {3}, {-kInf}))},
             {"unknown flag bit 2",
              [&](Bytes& b) {
                with(topk_gaps(1, {3}, {1.0f}))(b);
                store<uint8_t>(b, kFlagsAt, 4);
              }},
             {"param set", [](Bytes& b) { store<uint32_t>(b, kParamAt, 1); }},
         });
}

TEST(CorruptFrameTargeted, TopkFp16Values) {
  const Fixture f = make_fixture("topk:density=0.01,values=fp16", 7, 143);
  const auto with = [](std::initializer_list<uint16_t> halves) {
    Bytes values;
    for (const uint16_t h : halves) {
      values.resize(values.size() + 2);
      wire::store<uint16_t>(values.data() + values.size() - 2, h);
    }
    Bytes indices;
    append_bytes(indices, {3, 5});
    const Bytes payload = topk_payload(2, indices, values);
    return [payload](Bytes& b) {
      store<uint8_t>(b, kFlagsAt, 2);
      replace_payload(b, payload);
    };
  };
  const auto delta = decode_delta(f, with({float_to_fp16(0.5f), float_to_fp16(-3.0f)}));
  EXPECT_EQ(delta[3], 0.5f);
  EXPECT_EQ(delta[9], -3.0f);
  expect_all_rejected(f, {
                             {"fp16 NaN", with({0x3C00, 0x7E00})},
                             {"fp16 infinity", with({0xFC00, 0x3C00})},
                             {"fp16 values as fp32 length",
                              [&](Bytes& b) {
                                with({0x3C00, 0x3C00})(b);
                                store<uint8_t>(b, kFlagsAt, 0);  // claims fp32: length mismatch
                              }},
                         });
}

TEST(CorruptFrameTargeted, TopkBitmapPayloads) {
  const Fixture f = make_fixture("topk:density=0.5", 7, 143);
  ASSERT_EQ(load<uint8_t>(f.frame, kFlagsAt) & 1, 1) << "a dense selection is sent as a bitmap";
  const size_t bitmap_bytes = (kTargetedElements + 7) / 8;  // 126: bits 1001..1007 are padding
  const auto with = [&](uint32_t count, std::initializer_list<size_t> bits, size_t values,
                        size_t length = 0) {
    Bytes bitmap(length ? length : bitmap_bytes);
    for (const size_t bit : bits)
      bitmap[bit / 8] |= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
    Bytes vals;
    for (size_t j = 0; j < values; ++j) append_f32(vals, {static_cast<float>(j + 1)});
    const Bytes payload = topk_payload(count, bitmap, vals);
    return [payload](Bytes& b) {
      store<uint8_t>(b, kFlagsAt, 1);
      replace_payload(b, payload);
    };
  };
  const auto delta = decode_delta(f, with(2, {3, 1000}, 2));
  EXPECT_EQ(delta[3], 1.0f);
  EXPECT_EQ(delta[1000], 2.0f);
  expect_all_rejected(f, {
                             {"extra bit beyond count", with(2, {3, 9, 20}, 2)},
                             {"fewer bits than count", with(2, {3}, 2)},
                             {"padding bit past the last element", with(2, {3, 1001}, 2)},
                             {"last padding bit", with(1, {1007}, 1)},
                             {"bitmap one byte short", with(1, {3}, 1, bitmap_bytes - 1)},
                             {"bitmap one byte long", with(1, {3}, 1, bitmap_bytes + 1)},
                         });
}

// qsgd payload: [f32 scale][n integers]; param bits | headroom << 8 | summands << 16.
TEST(CorruptFrameTargeted, QsgdPayloads) {
  const Fixture f = make_fixture("qsgd:bits=4,workers=8", 7, 143);  // int8 levels
  const uint32_t param = 4 | 3 << 8 | 1 << 16;
  ASSERT_EQ(load<uint32_t>(f.frame, kParamAt), param);
  constexpr size_t kInts = kFrameHeaderBytes + 4;
  const auto level = [](size_t i, int8_t v) {
    return [i, v](Bytes& b) { store<int8_t>(b, kInts + i, v); };
  };
  const auto with_param = [](uint32_t p) {
    return [p](Bytes& b) { store<uint32_t>(b, kParamAt, p); };
  };
  const auto both = [](std::function<void(Bytes&)> a, std::function<void(Bytes&)> b) {
    return [a, b](Bytes& frame) {
      a(frame);
      b(frame);
    };
  };
  // Controls: the top level, and a doubled level in a frame that claims two summands.
  const float scale = load<float>(f.frame, kFrameHeaderBytes);
  EXPECT_FLOAT_EQ(decode_delta(f, level(5, 15))[5], scale);
  EXPECT_FLOAT_EQ(decode_delta(f, both(with_param(4 | 3 << 8 | 2 << 16), level(5, -30)))[5],
                  -2 * scale);
  expect_all_rejected(
      f, {
             {"NaN scale", [](Bytes& b) { store<float>(b, kFrameHeaderBytes, kNaN); }},
             {"infinite scale", [](Bytes& b) { store<float>(b, kFrameHeaderBytes, kInf); }},
             {"negative scale", [](Bytes& b) { store<float>(b, kFrameHeaderBytes, -1.0f); }},
             {"level 16 over 15", level(5, 16)},
             {"level -16", level(0, -16)},
             {"level -128", level(kTargetedElements - 1, -128)},
             {"level 31 with two summands", both(with_param(4 | 3 << 8 | 2 << 16), level(5, 31))},
             {"width mismatch: bits 8 needs int16", with_param(8 | 3 << 8 | 1 << 16)},
             {"bits 0", with_param(0 | 3 << 8 | 1 << 16)},
             {"bits 16", with_param(16 | 3 << 8 | 1 << 16)},
             {"headroom 17", with_param(4 | 17 << 8 | 1 << 16)},
             {"bits 15 headroom 16: int32 width", with_param(15 | 16 << 8 | 1 << 16)},
             {"summands 0", with_param(4 | 3 << 8)},
             {"summands 9 over headroom 3", with_param(4 | 3 << 8 | 9 << 16)},
             {"flags set", [](Bytes& b) { store<uint8_t>(b, kFlagsAt, 1); }},
             {"one integer short",
              [](Bytes& b) {
                b.pop_back();
                store<uint32_t>(b, kPayloadBytesAt,
                                static_cast<uint32_t>(b.size() - kFrameHeaderBytes));
              }},
             {"element count off by one",
              [](Bytes& b) { store<uint64_t>(b, kElementCountAt, kTargetedElements + 1); }},
         });
}

// sign payload: [f32 scale][ceil(n / 8) bytes]; 1001 elements leave 7 padding bits.
TEST(CorruptFrameTargeted, SignPayloads) {
  const Fixture f = make_fixture("sign", 7, 143);
  const size_t last = f.frame.size() - 1;
  const auto scale_to = [](float s) {
    return [s](Bytes& b) { store<float>(b, kFrameHeaderBytes, s); };
  };
  EXPECT_EQ(std::fabs(decode_delta(f, scale_to(0.25f))[1000]), 0.25f);
  expect_all_rejected(
      f, {
             {"padding bit 1 set", [&](Bytes& b) { b[last] |= std::byte{0x02}; }},
             {"padding bit 7 set", [&](Bytes& b) { b[last] |= std::byte{0x80}; }},
             {"NaN scale", scale_to(kNaN)},
             {"infinite scale", scale_to(kInf)},
             {"negative scale", scale_to(-0.5f)},
             {"flags set", [](Bytes& b) { store<uint8_t>(b, kFlagsAt, 1); }},
             {"param set", [](Bytes& b) { store<uint32_t>(b, kParamAt, 1); }},
             {"one byte short",
              [](Bytes& b) {
                b.pop_back();
                store<uint32_t>(b, kPayloadBytesAt,
                                static_cast<uint32_t>(b.size() - kFrameHeaderBytes));
              }},
             {"element count off by eight",
              [](Bytes& b) { store<uint64_t>(b, kElementCountAt, kTargetedElements + 8); }},
         });
}

// randomk payload: [u64 key][k f32 values].
TEST(CorruptFrameTargeted, RandomkPayloads) {
  const Fixture f = make_fixture("randomk:density=0.05", 7, 143);
  constexpr size_t kValues = kFrameHeaderBytes + 8;
  const auto value = [](size_t j, float v) {
    return [j, v](Bytes& b) { store<float>(b, kValues + 4 * j, v); };
  };
  const auto resize_payload = [](size_t bytes) {
    return [bytes](Bytes& b) {
      b.resize(kFrameHeaderBytes + bytes, std::byte{0});
      store<uint32_t>(b, kPayloadBytesAt, static_cast<uint32_t>(bytes));
    };
  };
  expect_all_rejected(
      f, {
             {"NaN value", value(0, kNaN)},
             {"infinite value", value(49, -kInf)},
             {"a partial value", resize_payload(8 + 4 * 50 + 1)},
             {"no values", resize_payload(8)},
             {"key only, short", resize_payload(5)},
             {"more values than elements", resize_payload(8 + 4 * (kTargetedElements + 1))},
             {"flags set", [](Bytes& b) { store<uint8_t>(b, kFlagsAt, 1); }},
             {"param set", [](Bytes& b) { store<uint32_t>(b, kParamAt, 1); }},
         });
}

// powersgd round-1 payload: [u32 rows][u32 cols][f32 Q, cols x rank]; param is the rank.
TEST(CorruptFrameTargeted, PowersgdPayloads) {
  const Fixture f = make_fixture("powersgd:rank=4", 7, 143);
  ASSERT_EQ(load<uint32_t>(f.frame, kParamAt), 4u);
  ASSERT_EQ(load<uint8_t>(f.frame, kRoundAt), 1);
  constexpr size_t kRowsAt = kFrameHeaderBytes, kColsAt = kFrameHeaderBytes + 4;
  const auto u32_at = [](size_t at, uint32_t v) {
    return [at, v](Bytes& b) { store<uint32_t>(b, at, v); };
  };
  const auto value = [](size_t j, float v) {
    return [j, v](Bytes& b) { store<float>(b, kFrameHeaderBytes + 8 + 4 * j, v); };
  };
  expect_all_rejected(f, {
                             {"rank 0", u32_at(kParamAt, 0)},
                             {"rank 65", u32_at(kParamAt, 65)},
                             {"rank 8 above the 7 rows", u32_at(kParamAt, 8)},
                             {"rank 5: payload too short", u32_at(kParamAt, 5)},
                             {"rows 0", u32_at(kRowsAt, 0)},
                             {"cols 0", u32_at(kColsAt, 0)},
                             {"rows 6 hold too few elements", u32_at(kRowsAt, 6)},
                             {"rows 8 pad a whole row", u32_at(kRowsAt, 8)},
                             {"rows 2^32-1", u32_at(kRowsAt, ~0u)},
                             {"NaN value", value(0, kNaN)},
                             {"infinite value", value(143 * 4 - 1, kInf)},
                             {"a step the stream holds no P_hat for",
                              [](Bytes& b) { store<uint64_t>(b, 16, load<uint64_t>(b, 16) + 1); },
                              ErrorCode::kInvalidArgument},
                         });
  std::vector<float> acc(f.elements, 1.0f);
  const Status st = f.codec->decode_accumulate(*parse_frame(f.frame), nullptr, acc);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << "decoding without the stream";
  EXPECT_EQ(acc, std::vector<float>(f.elements, 1.0f));
}

TEST(CorruptFrameTargeted, NoneAndHalfPayloads) {
  struct Family {
    const char* spec;
    size_t value_bytes;
    uint32_t nan_bits;
    uint32_t inf_bits;
  };
  for (const Family& family :
       {Family{"none", 4, 0x7FC00000u, 0xFF800000u}, Family{"fp16", 2, 0x7E00u, 0x7C00u},
        Family{"bf16", 2, 0x7FC0u, 0xFF80u}}) {
    SCOPED_TRACE(family.spec);
    const Fixture f = make_fixture(family.spec, 7, 143);
    const size_t width = family.value_bytes;
    const auto value = [width](size_t i, uint32_t bits) {
      return [i, bits, width](Bytes& b) {
        std::memcpy(b.data() + kFrameHeaderBytes + i * width, &bits, width);  // little-endian
      };
    };
    const auto drop_last = [width](Bytes& b) {
      b.resize(b.size() - width);
      store<uint32_t>(b, kPayloadBytesAt, static_cast<uint32_t>(b.size() - kFrameHeaderBytes));
    };
    expect_all_rejected(
        f, {
               {"NaN first value", value(0, family.nan_bits)},
               {"infinite last value", value(kTargetedElements - 1, family.inf_bits)},
               {"one value short", drop_last},
               {"flags set", [](Bytes& b) { store<uint8_t>(b, kFlagsAt, 1); }},
               {"param set", [](Bytes& b) { store<uint32_t>(b, kParamAt, 1); }},
               {"element count off by one",
                [](Bytes& b) { store<uint64_t>(b, kElementCountAt, kTargetedElements + 1); }},
           });
  }
}

}  // namespace
}  // namespace gradgate::kernels
