// Helpers of the corrupted-frame tests (corrupt_frame_test.cc, corrupt_payload_test.cc): the
// frame header's field offsets, a codec with a valid frame to corrupt, and the decode that checks
// what a corrupted frame did to the accumulator.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "codec_test_util.h"
#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/wire_io.h"
#include "gradient_data.h"

namespace gradgate::kernels::corrupt {

using test_util::Bytes;

// Header field offsets (frame.h).
inline constexpr size_t kVersionAt = 4;
inline constexpr size_t kCodecAt = 5;
inline constexpr size_t kRoundAt = 6;
inline constexpr size_t kFlagsAt = 7;
inline constexpr size_t kElementCountAt = 24;
inline constexpr size_t kParamAt = 36;
inline constexpr size_t kPayloadBytesAt = 40;
inline constexpr size_t kCrcAt = 44;

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

template <typename T>
T load(const Bytes& frame, size_t at) {
  return wire::load<T>(frame.data() + at);
}

template <typename T>
void store(Bytes& frame, size_t at, T value) {
  wire::store<T>(frame.data() + at, value);
}

inline std::vector<float> pattern_acc(size_t n) {
  std::vector<float> acc(n);
  for (size_t i = 0; i < n; ++i) acc[i] = 0.5f - static_cast<float>(i % 7);
  return acc;
}

// Replaces the payload (bytes after the header) and its length field; the CRC is left stale.
inline void replace_payload(Bytes& frame, const Bytes& payload) {
  frame.resize(kFrameHeaderBytes + payload.size());
  std::memcpy(frame.data() + kFrameHeaderBytes, payload.data(), payload.size());
  store<uint32_t>(frame, kPayloadBytesAt, static_cast<uint32_t>(payload.size()));
}

// A codec with one stream and a valid last-round frame of it: the input of every corruption.
struct Fixture {
  std::unique_ptr<Codec> codec;
  std::unique_ptr<Stream> stream;
  size_t elements = 0;
  Bytes frame;
};

inline Fixture make_fixture(const std::string& spec, size_t rows, size_t cols) {
  Fixture f;
  auto codec = test_util::make_codec(spec);
  EXPECT_TRUE(codec.ok()) << codec.status().to_string();
  if (!codec.ok()) return f;
  f.codec = std::move(codec).value();
  const TensorDesc desc = test_util::matrix_desc(rows, cols);
  f.elements = desc.elements;
  auto stream = f.codec->make_stream(desc);
  EXPECT_TRUE(stream.ok()) << stream.status().to_string();
  if (!stream.ok()) return f;
  f.stream = std::move(stream).value();
  const auto grad = bench::make_gradient(bench::Dist::kLaplace, desc.elements, 21);
  Stream* one[] = {f.stream.get()};
  StepContext ctx;
  ctx.step = 9;
  ctx.job_seed = 5;
  auto out = test_util::run_step(*f.codec, one, std::span(&grad, 1), ctx);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (out.ok()) f.frame = out->frames.back()[0];
  return f;
}

// Parses `frame` and, if that succeeds, decodes it into a patterned accumulator of the frame's
// element count (or the fixture's, when the header's is implausible). Returns the first error.
// A failed decode must leave the accumulator bit-identical; a successful one must leave it
// finite.
inline Status parse_and_decode(const Fixture& f, const Bytes& frame) {
  auto view = parse_frame(frame);
  if (!view.ok()) return view.status();
  const uint64_t count = view->header.element_count;
  const size_t n = count <= 4 * f.elements ? static_cast<size_t>(count) : f.elements;
  const std::vector<float> before = pattern_acc(n);
  std::vector<float> acc = before;
  const Status st = f.codec->decode_accumulate(*view, f.stream.get(), acc);
  if (!st.ok()) {
    EXPECT_EQ(std::memcmp(acc.data(), before.data(), n * sizeof(float)), 0)
        << "a rejected frame wrote to the accumulator: " << st.to_string();
  } else {
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(acc[i])) {
        ADD_FAILURE() << "an accepted frame decoded a non-finite value at " << i;
        break;
      }
    }
  }
  return st;
}

}  // namespace gradgate::kernels::corrupt
