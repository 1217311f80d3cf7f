// The CUDA topk codec against the CPU codec: exact selection gives the same frames byte for byte
// and the same residuals bit for bit; threshold selection keeps k to 1.1 k elements, cold and warm,
// in at most two passes in steady state, and where it needs rescans selects what the CPU codec
// selects; frames decode across the two; error feedback holds over 100 steps; non-finite gradients
// and malformed frames fail as on the CPU; the staged first pass gives the same frames. Every test
// skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "codec_data.h"
#include "codec_test_util.h"
#include "cuda_test_util.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/cuda_codecs.h"
#include "gradgate/kernels/frame.h"
#include "topk_select.h"

namespace gradgate::kernels {
namespace {

using cuda_test::Bytes;
using cuda_test::CodecPair;
using cuda_test::context;
using cuda_test::SizeAndDensity;
using test_util::make_finite_values;
using test_util::same_bits;
using test_util::same_bytes;

uint32_t frame_count(const Bytes& frame) {
  uint32_t count = 0;
  std::memcpy(&count, frame.data() + kFrameHeaderBytes, sizeof count);
  return count;
}

// Gaussian or Laplace values of scale 1e-3: independent every step.
std::vector<float> gradient(bool laplace, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::exponential_distribution<float> exponential(1e3f);
  std::vector<float> out(n);
  for (auto& v : out) v = laplace ? (rng() & 1 ? 1.0f : -1.0f) * exponential(rng) : normal(rng);
  return out;
}

class TopkExactTest : public cuda_test::GpuParamTest<SizeAndDensity> {
 protected:
  size_t n() const { return std::get<0>(GetParam()); }
  double density() const { return std::get<1>(GetParam()); }
};

TEST_P(TopkExactTest, FramesAndResidualsMatchTheCpuCodec) {
  for (const char* options : {"select=exact", "select=exact,values=fp16", "select=exact,ef=0"}) {
    const std::string spec = "topk:density=" + std::to_string(density()) + "," + options;
    SCOPED_TRACE(spec);
    CodecPair codecs(spec, n());
    for (uint64_t step = 0; step < 4; ++step) {
      const auto grad = make_finite_values(n(), 10 + step);
      ASSERT_NO_FATAL_FAILURE(codecs.expect_same_step(grad, context(MemoryKind::kHost, step)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, TopkExactTest, cuda_test::sizes_and_densities(),
                         cuda_test::size_and_density_name);

class TopkCudaTest : public cuda_test::GpuTest {};

TEST_F(TopkCudaTest, ThresholdCountsStayInTheWindowColdAndWarm) {
  const size_t n = size_t{1} << 20;
  for (bool laplace : {false, true}) {
    for (double density : {0.01, 0.001}) {
      SCOPED_TRACE(testing::Message() << (laplace ? "laplace" : "gaussian") << " " << density);
      CodecPair codecs("topk:density=" + std::to_string(density), n);
      const size_t k = cpu::topk_count(density, n);
      for (uint64_t step = 0; step <= 20; ++step) {
        const auto grad = gradient(laplace, n, 100 + step);
        auto frame = codecs.encode_gpu(grad, context(MemoryKind::kDevice, step));
        ASSERT_TRUE(frame.ok()) << frame.status().to_string();
        const uint32_t count = frame_count(*frame);
        EXPECT_GE(count, k) << "step " << step;
        EXPECT_LE(count, k + k / 10) << "step " << step;
        if (step >= 3) {
          EXPECT_LE(codecs.gpu_passes(), 2) << "step " << step;
        }
        auto decoded =
            cuda_test::decode_on_cpu(*codecs.cpu, *frame, std::vector<float>(n, 0.0f), true);
        ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
      }
    }
  }
}

TEST_F(TopkCudaTest, AWarmStepWhoseCandidatesOverflowTheListMatchesTheCpuCodec) {
  // Step 3 lifts every |g| far above the warm threshold: the first pass finds more candidates than
  // its list holds, and the selection goes on with rescans of the residual.
  const size_t n = 100003;
  for (const char* spec :
       {"topk:density=0.01,select=exact", "topk:density=0.01,select=exact,values=fp16"}) {
    SCOPED_TRACE(spec);
    CodecPair codecs(spec, n);
    for (uint64_t step = 0; step < 5; ++step) {
      auto grad = gradient(false, n, 300 + step);
      if (step == 3) {
        for (auto& v : grad) v += v < 0.0f ? -1.0f : 1.0f;
      }
      ASSERT_NO_FATAL_FAILURE(codecs.expect_same_step(grad, context(MemoryKind::kHost, step)));
      if (step == 3) {
        EXPECT_GT(codecs.gpu_passes(), 1) << "no rescan: the list did not overflow";
      }
    }
  }
}

TEST_F(TopkCudaTest, TiesThatNoThresholdSeparatesAreSelectedFromTheWholeArrayLikeTheCpu) {
  // Every |g| equal but a few: no candidate threshold leaves between k and the list's capacity,
  // so the selection keeps from the whole array (full aligned tiles and a short last one), lower
  // indices first.
  const size_t n = 3 * 4096 + 5;
  for (const char* spec :
       {"topk:density=0.01,select=exact", "topk:density=0.01,select=exact,ef=0"}) {
    SCOPED_TRACE(spec);
    CodecPair codecs(spec, n);
    for (uint64_t step = 0; step < 3; ++step) {
      std::vector<float> grad(n, step % 2 ? -0.25f : 0.25f);
      for (size_t i = 7; i < n; i += 997) grad[i] = 2.0f;
      ASSERT_NO_FATAL_FAILURE(codecs.expect_same_step(grad, context(MemoryKind::kHost, step)));
    }
  }
}

// The indices that a frame sends: where its values, decoded on the CPU, are not zero.
std::vector<uint32_t> sent_indices(const Codec& cpu_codec, const Bytes& frame, size_t n) {
  const auto decoded =
      cuda_test::decode_on_cpu(cpu_codec, frame, std::vector<float>(n, 0.0f), true);
  EXPECT_TRUE(decoded.ok()) << decoded.status().to_string();
  std::vector<uint32_t> sent;
  for (uint32_t i = 0; decoded.ok() && i < n; ++i) {
    if ((*decoded)[i] != 0.0f) sent.push_back(i);
  }
  return sent;
}

TEST_F(TopkCudaTest, ThresholdSelectionsThatRescanSelectWhatTheCpuCodecSelects) {
  // The Laplace estimate is far off, too high or too low: both codecs rescan at the thresholds of
  // the one steering (gradgate/kernels/topk_steering.h) and keep the same 1050 candidates.
  for (bool too_high : {true, false}) {
    SCOPED_TRACE(too_high ? "estimate too high" : "estimate too low");
    const auto grad = test_util::make_topk_rescan_values(too_high, 7);
    const size_t n = grad.size();
    CodecPair codecs("topk:density=0.01", n);
    const auto cpu_frame = codecs.encode_cpu(grad, context(MemoryKind::kHost, 0));
    const auto gpu_frame = codecs.encode_gpu(grad, context(MemoryKind::kDevice, 0));
    ASSERT_TRUE(cpu_frame.ok()) << cpu_frame.status().to_string();
    ASSERT_TRUE(gpu_frame.ok()) << gpu_frame.status().to_string();
    EXPECT_EQ(codecs.gpu_passes(), 4);  // the first pass, the estimate's scan, two rescans
    const auto cpu_sent = sent_indices(*codecs.cpu, *cpu_frame, n);
    EXPECT_EQ(cpu_sent.size(), 1050u);
    EXPECT_EQ(sent_indices(*codecs.cpu, *gpu_frame, n), cpu_sent);
  }
}

// The staged first pass (first_pass=staged) against the CPU codec, for a spec that clears the
// residual in the pass (fp32 values), one without a residual and one that does not clear it (fp16
// values).
class TopkStagedFirstPassTest : public cuda_test::GpuParamTest<const char*> {};

TEST_P(TopkStagedFirstPassTest, MatchesTheCpuCodecOverSeveralTilesPerBlock) {
  // 2^23 + 5 elements: 2049 tiles of 4096, several for each block of a grid that fills any GPU of
  // up to 600 resident blocks, so that a block copies its next tile while it works on one; the
  // short last tile takes the plain loads. A cold step, then warm ones. The codecs' device
  // buffers come from cudaMalloc (256-byte aligned), so full tiles take the staged loads.
  const size_t n = (size_t{1} << 23) + 5;
  CodecPair codecs(GetParam(), n);
  for (uint64_t step = 0; step < 4; ++step) {
    const auto grad = gradient(step % 2 == 1, n, 500 + step);
    ASSERT_NO_FATAL_FAILURE(codecs.expect_same_step(grad, context(MemoryKind::kHost, step)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Specs, TopkStagedFirstPassTest,
    ::testing::Values("topk:density=0.01,select=exact,first_pass=staged",
                      "topk:density=0.001,select=exact,ef=0,first_pass=staged",
                      "topk:density=0.01,select=exact,values=fp16,first_pass=staged"),
    [](const ::testing::TestParamInfo<const char*>& test) {
      return test_util::spec_test_name(test.param);
    });

TEST_P(TopkStagedFirstPassTest, MatchesTheCpuCodecOnSmallTensors) {
  // One element, a tile less one, a tile and one, and 17 tiles and a bit: the staged pass's first
  // tiles, its partial last one and the rescans, at sizes a memory checker runs through quickly.
  for (const size_t n : {size_t{1}, size_t{4095}, size_t{4097}, size_t{70001}}) {
    CodecPair codecs(GetParam(), n);
    for (uint64_t step = 0; step < 3; ++step) {
      const auto grad = gradient(step == 1, n, 700 + step);
      ASSERT_NO_FATAL_FAILURE(codecs.expect_same_step(grad, context(MemoryKind::kHost, step)))
          << "n " << n << ", step " << step;
    }
  }
}

TEST_F(TopkCudaTest, CpuFramesDecodeOnTheGpuToTheSameValues) {
  // Density 0.5 writes a bitmap, the others gap varints.
  for (const char* spec : {"topk:density=0.01", "topk:density=0.5", "topk:density=0.05,values=fp16",
                           "topk:density=0.1,select=exact"}) {
    for (size_t n : {size_t{1}, size_t{37}, size_t{100003}}) {
      SCOPED_TRACE(testing::Message() << spec << " n " << n);
      CodecPair codecs(spec, n);
      const auto grad = make_finite_values(n, 20);
      const Bytes frame = codecs.encode_cpu(grad, context(MemoryKind::kHost, 1)).value();
      const Bytes gpu_frame = codecs.encode_gpu(grad, context(MemoryKind::kDevice, 1)).value();
      ASSERT_TRUE(parse_frame(gpu_frame).ok());  // the device-written CRC verifies on the host
      const auto acc = make_finite_values(n, 21);
      for (bool overwrite : {false, true}) {
        auto expected = cuda_test::decode_on_cpu(*codecs.cpu, frame, acc, overwrite);
        ASSERT_TRUE(expected.ok()) << expected.status().to_string();
        auto on_gpu = cuda_test::decode_on_gpu(*codecs.gpu, frame, acc, overwrite);
        ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().to_string();
        EXPECT_TRUE(same_bits(*expected, *on_gpu));
        auto gpu_frame_on_gpu = cuda_test::decode_on_gpu(*codecs.gpu, gpu_frame, acc, overwrite);
        auto gpu_frame_on_cpu = cuda_test::decode_on_cpu(*codecs.cpu, gpu_frame, acc, overwrite);
        ASSERT_TRUE(gpu_frame_on_gpu.ok()) << gpu_frame_on_gpu.status().to_string();
        ASSERT_TRUE(gpu_frame_on_cpu.ok()) << gpu_frame_on_cpu.status().to_string();
        EXPECT_TRUE(same_bits(*gpu_frame_on_cpu, *gpu_frame_on_gpu));
      }
    }
  }
}

TEST_F(TopkCudaTest, ErrorFeedbackInvariantHoldsOver100Steps) {
  for (const char* spec :
       {"topk:density=0.01", "topk:density=0.05,select=exact", "topk:density=0.02,values=fp16"}) {
    SCOPED_TRACE(spec);
    const size_t n = 5000;
    CodecPair codecs(spec, n);
    std::vector<float> residual(n, 0.0f);
    for (uint64_t step = 0; step < 100; ++step) {
      const auto grad = make_finite_values(n, 1000 + step);
      auto frame = codecs.encode_gpu(grad, context(MemoryKind::kDevice, step));
      ASSERT_TRUE(frame.ok()) << frame.status().to_string();
      SCOPED_TRACE(step);
      cuda_test::expect_error_feedback(codecs, grad, *frame, residual);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(TopkCudaTest, NonFiniteGradientsFailLikeTheCpuAndKeepTheResidual) {
  const size_t n = 10007;
  for (const char* spec : {"topk:density=0.01,select=exact", "topk:density=0.01"}) {
    SCOPED_TRACE(spec);
    CodecPair codecs(spec, n);
    const bool exact = std::string(spec).find("exact") != std::string::npos;
    for (uint64_t step = 0; step < 3; ++step) {  // warm, with a residual to restore
      const auto warm = make_finite_values(n, 50 + step);
      ASSERT_TRUE(codecs.encode_cpu(warm, context(MemoryKind::kHost, step)).ok());
      ASSERT_TRUE(codecs.encode_gpu(warm, context(MemoryKind::kDevice, step)).ok());
    }
    const auto before = codecs.gpu_residual();
    auto grad = test_util::make_values(n, 51, true);
    grad[n / 2] = std::numeric_limits<float>::quiet_NaN();
    const auto cpu_frame = codecs.encode_cpu(grad, context(MemoryKind::kHost, 3));
    const auto gpu_frame = codecs.encode_gpu(grad, context(MemoryKind::kDevice, 3));
    ASSERT_FALSE(cpu_frame.ok());
    ASSERT_FALSE(gpu_frame.ok());
    EXPECT_EQ(gpu_frame.status().code(), ErrorCode::kNonFiniteGradient);
    EXPECT_EQ(gpu_frame.status().message(), cpu_frame.status().message());
    const auto after = codecs.gpu_residual();
    if (exact) {
      EXPECT_TRUE(same_bits(codecs.cpu_stream->residual(), after));
    }
    for (size_t i = 0; i < n; ++i) {  // e + g - g: exact to the rounding of the sum
      const double g = std::isfinite(grad[i]) ? std::fabs(grad[i]) : 0.0;  // inf, NaN: kept
      const double rounding = 1e-6 * (1.0 + std::fabs(before[i]) + g);
      ASSERT_NEAR(before[i], after[i], rounding) << "element " << i;
    }
  }
}

// A topk payload with `count` and the given index bytes and fp32 values.
Bytes topk_frame(uint64_t n, uint8_t flags, uint32_t count, const std::vector<uint8_t>& indices,
                 const std::vector<float>& values) {
  Bytes frame(kFrameHeaderBytes + 8 + indices.size() + 4 * values.size());
  std::byte* p = frame.data() + kFrameHeaderBytes;
  const auto index_bytes = static_cast<uint32_t>(indices.size());
  std::memcpy(p, &count, 4);
  std::memcpy(p + 4, &index_bytes, 4);
  std::memcpy(p + 8, indices.data(), indices.size());
  std::memcpy(p + 8 + indices.size(), values.data(), 4 * values.size());
  FrameHeader header;
  header.codec = CodecId::kTopk;
  header.flags = flags;
  header.tensor_id = 7;
  header.job_id = 3;
  header.element_count = n;
  header.payload_bytes = static_cast<uint32_t>(frame.size() - kFrameHeaderBytes);
  seal_frame(header, frame);
  return frame;
}

TEST_F(TopkCudaTest, MalformedFramesFailLikeTheCpu) {
  const uint64_t n = 20;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* what;
    Bytes frame;
  };
  const Case cases[] = {
      {"valid varints", topk_frame(n, 0, 2, {3, 4}, {1.0f, 2.0f})},
      {"valid bitmap", topk_frame(n, 1, 2, {0x08, 0x01, 0x00}, {1.0f, 2.0f})},
      {"count beyond n", topk_frame(n, 0, 21, {}, {})},
      {"more indices than count", topk_frame(n, 0, 1, {3, 4}, {1.0f})},
      {"fewer indices than count", topk_frame(n, 0, 2, {3}, {1.0f, 2.0f})},
      {"index out of range", topk_frame(n, 0, 2, {3, 16}, {1.0f, 2.0f})},
      {"truncated varint", topk_frame(n, 0, 1, {0x83}, {1.0f})},
      {"varint longer than 5 bytes",
       topk_frame(n, 0, 1, {0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, {1.0f})},
      {"bitmap bit past n", topk_frame(n, 1, 2, {0x01, 0x00, 0x10}, {1.0f, 2.0f})},
      {"bitmap more bits than count", topk_frame(n, 1, 1, {0x03, 0x00, 0x00}, {1.0f})},
      {"bitmap of the wrong length", topk_frame(n, 1, 1, {0x01, 0x00}, {1.0f})},
      {"NaN value", topk_frame(n, 0, 2, {3, 4}, {1.0f, nan})},
      {"unknown flags", topk_frame(n, 4, 0, {}, {})},
  };
  CodecPair codecs("topk:density=0.1", n);
  const std::vector<float> acc(n, 1.0f);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    for (bool overwrite : {false, true}) {
      const auto expected = cuda_test::decode_on_cpu(*codecs.cpu, c.frame, acc, overwrite);
      const auto on_gpu = cuda_test::decode_on_gpu(*codecs.gpu, c.frame, acc, overwrite);
      ASSERT_EQ(on_gpu.ok(), expected.ok()) << on_gpu.status().to_string();
      if (expected.ok()) {
        EXPECT_TRUE(same_bits(*expected, *on_gpu));
      } else {
        EXPECT_EQ(on_gpu.status().code(), expected.status().code());
      }
    }
  }
}

TEST_F(TopkCudaTest, OverlapHasNoCudaImplementation) {
  auto codec = make_cuda_codec(parse_codec_spec("topk:overlap=0.5").value());
  ASSERT_FALSE(codec.ok());
  EXPECT_EQ(codec.status().code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(make_cuda_codec(parse_codec_spec("topk").value()).ok());
}

}  // namespace
}  // namespace gradgate::kernels
