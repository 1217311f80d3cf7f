// The CUDA codecs against the CPU codecs: the same frames byte for byte (checksum included) and
// the same residuals bit for bit, for every element-wise codec and sizes from 1 to 2^20 + 3;
// frames decode across the two; sums; the error-feedback invariant over 100 steps; non-finite
// gradients and malformed frames give the CPU's errors. Every test skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "codec_data.h"
#include "codec_test_util.h"
#include "cuda_test_util.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/cuda_codecs.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/wire_io.h"

namespace gradgate::kernels {
namespace {

using cuda_test::add_on_gpu;
using cuda_test::Bytes;
using cuda_test::CodecPair;
using cuda_test::context;
using cuda_test::decode_on_cpu;
using cuda_test::decode_on_gpu;
using cuda_test::DeviceArray;
using cuda_test::DeviceFrame;
using test_util::make_finite_values;
using test_util::make_values;
using test_util::same_bits;
using test_util::same_bytes;

const std::vector<std::string> kSpecs = {"none",
                                         "fp16",
                                         "fp16:ef=0",
                                         "bf16",
                                         "qsgd:bits=4,workers=8",
                                         "qsgd:bits=8,workers=64",
                                         "qsgd:bits=15,workers=65535",
                                         "sign",
                                         "sign:ef=0"};
const std::vector<size_t> kSizes = {1, 7, 1000, (size_t{1} << 20) + 3};

using SpecAndSize = std::tuple<std::string, size_t>;

std::string case_name(const ::testing::TestParamInfo<SpecAndSize>& test) {
  return test_util::spec_test_name(std::get<0>(test.param)) + "_" +
         std::to_string(std::get<1>(test.param));
}

// The GPU's add_frames gave the CPU's frame byte for byte, or the CPU's error code and message.
void expect_same_outcome(const Result<Bytes>& expected, const Result<Bytes>& on_gpu) {
  ASSERT_EQ(expected.ok(), on_gpu.ok()) << on_gpu.status().to_string();
  if (expected.ok()) {
    EXPECT_TRUE(same_bytes(*expected, *on_gpu));
  } else {
    EXPECT_EQ(expected.status().code(), on_gpu.status().code());
    EXPECT_EQ(expected.status().message(), on_gpu.status().message());
  }
}

class CudaCodecTest : public cuda_test::GpuParamTest<SpecAndSize> {
 protected:
  const std::string& spec() const { return std::get<0>(GetParam()); }
  size_t n() const { return std::get<1>(GetParam()); }
  bool summable() const { return !spec().starts_with("sign"); }
  /// make_finite_values that this spec encodes (fp16 without a residual refuses beyond 65504).
  std::vector<float> finite_values(uint64_t seed) const {
    return make_finite_values(n(), seed, spec() == "fp16:ef=0" ? kFp16Max : 1e30f);
  }
};

TEST_P(CudaCodecTest, FramesAndResidualsMatchTheCpuCodec) {
  CodecPair codecs(spec(), n());
  for (uint64_t step = 0; step < 4; ++step) {
    const auto grad = finite_values(10 + step);
    StepContext ctx = context(MemoryKind::kHost, step, 1);
    if (codecs.cpu->needs_agreed_scale()) {
      const float cpu_scale = codecs.cpu->local_scale(grad, *codecs.cpu_stream);
      DeviceArray<float> device_grad(grad);
      EXPECT_EQ(codecs.gpu->local_scale(device_grad.span(), *codecs.gpu_stream), cpu_scale);
      if (step % 2 == 1) ctx.agreed_scale = 2.0f * cpu_scale;  // an agreed scale, or the local one
    }
    ASSERT_NO_FATAL_FAILURE(codecs.expect_same_step(grad, ctx));
  }
  EXPECT_EQ(codecs.gpu_stream->memory_bytes(), codecs.cpu_stream->memory_bytes());
}

TEST_P(CudaCodecTest, FramesDecodeAcrossCpuAndGpu) {
  CodecPair codecs(spec(), n());
  const auto grad = finite_values(20);
  const Bytes frame = codecs.encode_cpu(grad, context(MemoryKind::kHost, 1)).value();
  const Bytes gpu_frame = codecs.encode_gpu(grad, context(MemoryKind::kDevice, 1)).value();
  ASSERT_TRUE(parse_frame(gpu_frame).ok());  // the device-written CRC verifies on the host
  const auto acc = finite_values(21);
  for (bool overwrite : {false, true}) {
    SCOPED_TRACE(overwrite ? "decode" : "decode_accumulate");
    auto expected = decode_on_cpu(*codecs.cpu, frame, acc, overwrite);
    ASSERT_TRUE(expected.ok()) << expected.status().to_string();
    auto on_gpu = decode_on_gpu(*codecs.gpu, frame, acc, overwrite);
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().to_string();
    EXPECT_TRUE(same_bits(*expected, *on_gpu));
    auto gpu_frame_on_cpu = decode_on_cpu(*codecs.cpu, gpu_frame, acc, overwrite);
    ASSERT_TRUE(gpu_frame_on_cpu.ok()) << gpu_frame_on_cpu.status().to_string();
    EXPECT_TRUE(same_bits(*expected, *gpu_frame_on_cpu));
  }
}

TEST_P(CudaCodecTest, AddFramesMatchesTheCpu) {
  CodecPair codecs(spec(), n());
  CodecPair other(spec(), n());
  const auto grad0 = finite_values(30);
  const auto grad1 = finite_values(31);
  StepContext ctx = context(MemoryKind::kHost, 3, 0);
  if (codecs.cpu->needs_agreed_scale()) {
    ctx.agreed_scale = std::max(codecs.cpu->local_scale(grad0, *codecs.cpu_stream),
                                other.cpu->local_scale(grad1, *other.cpu_stream));
  }
  const Bytes a = codecs.encode_cpu(grad0, ctx).value();
  ctx.worker = 1;
  const Bytes b = other.encode_cpu(grad1, ctx).value();
  auto expected = test_util::add_frame_bytes(*codecs.cpu, a, b);
  auto on_gpu = add_on_gpu(*codecs.gpu, a, b);
  if (!summable()) {
    EXPECT_EQ(on_gpu.status().code(), ErrorCode::kUnsupported);
    return;
  }
  expect_same_outcome(expected, on_gpu);
}

TEST_P(CudaCodecTest, EncodeAddMatchesTheCpu) {
  if (!summable()) GTEST_SKIP() << "not summable";
  CodecPair codecs(spec(), n());
  CodecPair other(spec(), n());
  const auto grad0 = finite_values(40);
  const auto grad1 = finite_values(41);
  StepContext ctx = context(MemoryKind::kHost, 5, 0, spec().starts_with("qsgd") ? 64.0f : 0.0f);
  const Bytes theirs = other.encode_cpu(grad1, ctx).value();
  ctx.worker = 1;
  Bytes expected(codecs.cpu->max_frame_bytes(codecs.cpu_stream->desc()));
  auto cpu_size = codecs.cpu->encode_add(0, ctx, grad0, *codecs.cpu_stream,
                                         parse_frame(theirs).value(), expected);

  DeviceFrame device_theirs(theirs);
  DeviceArray<float> device_grad{std::span<const float>(grad0)};
  DeviceArray<std::byte> out(codecs.gpu->max_frame_bytes(codecs.gpu_stream->desc()));
  ctx.memory = MemoryKind::kDevice;
  auto gpu_size = codecs.gpu->encode_add(0, ctx, device_grad.span(), *codecs.gpu_stream,
                                         device_theirs.view, out.span());
  // A sum out of the 16-bit range (large n draws large values) fails alike on both.
  ASSERT_EQ(cpu_size.ok(), gpu_size.ok())
      << cpu_size.status().to_string() << " vs " << gpu_size.status().to_string();
  if (cpu_size.ok()) {
    expected.resize(*cpu_size);
    EXPECT_TRUE(same_bytes(expected, out.download(*gpu_size)));
  } else {
    EXPECT_EQ(cpu_size.status().code(), gpu_size.status().code());
    EXPECT_EQ(cpu_size.status().message(), gpu_size.status().message());
  }
  EXPECT_TRUE(same_bits(codecs.cpu_stream->residual(), codecs.gpu_residual()));
}

// Finite frames whose sum leaves the payload's range (fp16's 65504, fp32's FLT_MAX): the GPU's
// add_frames gives the CPU's outcome (none, fp16, bf16: the step is skipped as non-finite).
TEST_P(CudaCodecTest, SumsBeyondTheNumberRangeFailLikeTheCpu) {
  if (!summable()) GTEST_SKIP() << "not summable";
  CodecPair codecs(spec(), n());
  CodecPair other(spec(), n());
  auto grad = finite_values(45);
  grad[n() / 2] = spec().starts_with("fp16") ? 40000.0f : 2e38f;
  StepContext ctx = context(MemoryKind::kHost, 6, 0);
  if (codecs.cpu->needs_agreed_scale()) {
    ctx.agreed_scale = codecs.cpu->local_scale(grad, *codecs.cpu_stream);
  }
  const Bytes a = codecs.encode_cpu(grad, ctx).value();
  ctx.worker = 1;
  const Bytes b = other.encode_cpu(grad, ctx).value();
  auto expected = test_util::add_frame_bytes(*codecs.cpu, a, b);
  auto on_gpu = add_on_gpu(*codecs.gpu, a, b);
  if (spec() == "none" || spec().starts_with("fp16") || spec() == "bf16") {
    ASSERT_EQ(expected.status().code(), ErrorCode::kNonFiniteGradient);
  }
  expect_same_outcome(expected, on_gpu);
}

TEST_P(CudaCodecTest, NonFiniteGradientsFailLikeTheCpuAndKeepTheResidual) {
  CodecPair codecs(spec(), n());
  // A first step fills the residual, so that restoring it is visible.
  const auto warm = finite_values(50);
  ASSERT_TRUE(codecs.encode_cpu(warm, context(MemoryKind::kHost, 0)).ok());
  ASSERT_TRUE(codecs.encode_gpu(warm, context(MemoryKind::kDevice, 0)).ok());
  auto grad = make_values(n(), 51, true);
  grad[n() / 2] = std::numeric_limits<float>::quiet_NaN();
  const auto cpu_frame = codecs.encode_cpu(grad, context(MemoryKind::kHost, 1));
  const auto gpu_frame = codecs.encode_gpu(grad, context(MemoryKind::kDevice, 1));
  ASSERT_FALSE(cpu_frame.ok());
  ASSERT_FALSE(gpu_frame.ok());
  EXPECT_EQ(cpu_frame.status().code(), ErrorCode::kNonFiniteGradient);
  EXPECT_EQ(gpu_frame.status().code(), cpu_frame.status().code());
  EXPECT_EQ(gpu_frame.status().message(), cpu_frame.status().message());
  EXPECT_TRUE(same_bits(codecs.cpu_stream->residual(), codecs.gpu_residual()));
}

TEST_P(CudaCodecTest, ErrorFeedbackInvariantHoldsOver100Steps) {
  if (n() > 100000) GTEST_SKIP() << "100 steps on the smaller sizes";
  CodecPair codecs(spec(), n());
  const bool keeps_residual = codecs.gpu_stream->memory_bytes() > 0;
  if (!keeps_residual && spec() != "none") GTEST_SKIP() << "no error feedback";
  std::vector<float> residual(n(), 0.0f);
  for (uint64_t step = 0; step < 100; ++step) {
    const auto grad = finite_values(1000 + step);
    auto frame = codecs.encode_gpu(grad, context(MemoryKind::kDevice, step));
    ASSERT_TRUE(frame.ok()) << frame.status().to_string();
    auto cpu_frame = codecs.encode_cpu(grad, context(MemoryKind::kHost, step));
    ASSERT_TRUE(cpu_frame.ok()) << cpu_frame.status().to_string();
    ASSERT_TRUE(same_bytes(*cpu_frame, *frame)) << "step " << step;
    auto decoded = decode_on_gpu(*codecs.gpu, *frame, std::vector<float>(n(), 0.0f), true);
    ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
    const auto after = keeps_residual ? codecs.gpu_residual() : std::vector<float>(n(), 0.0f);
    SCOPED_TRACE("step " + std::to_string(step));
    cuda_test::expect_error_feedback(grad, *decoded, after, residual);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Specs, CudaCodecTest,
                         ::testing::Combine(::testing::ValuesIn(kSpecs),
                                            ::testing::ValuesIn(kSizes)),
                         case_name);

// The scale passes past the sizes above: sign's ordered sum over several chunks of block sums, and
// gradients that are not 16-byte aligned (the 4-byte loads), for sign and qsgd's local scale, and
// for top-k's first pass (a warm step clears its candidates from the residual through the 4-byte
// stores).
class CudaScalePassTest : public cuda_test::GpuTest {};

TEST_F(CudaScalePassTest, LargeAndUnalignedGradientsMatchTheCpuCodec) {
  const size_t n = size_t{4096} * 2048 * 2 + 4096 * 3 + 5;
  for (const std::string spec :
       {"sign", "qsgd:bits=8,workers=64", "topk:density=0.01,select=exact"}) {
    for (size_t offset : {0, 1}) {
      SCOPED_TRACE(spec + ", offset " + std::to_string(offset));
      CodecPair codecs(spec, n);
      for (uint64_t step = 0; step < 2; ++step) {
        const auto grad = make_finite_values(n, 80 + step);
        DeviceArray<float> device_grad(n + offset);
        ASSERT_EQ(cudaMemcpy(device_grad.span().data() + offset, grad.data(), n * sizeof(float),
                             cudaMemcpyHostToDevice),
                  cudaSuccess);
        const std::span<const float> gpu_grad = device_grad.span().subspan(offset, n);
        StepContext ctx = context(MemoryKind::kHost, step, 1);
        if (codecs.cpu->needs_agreed_scale()) {
          EXPECT_EQ(codecs.gpu->local_scale(gpu_grad, *codecs.gpu_stream),
                    codecs.cpu->local_scale(grad, *codecs.cpu_stream));
        }
        auto cpu_frame = codecs.encode_cpu(grad, ctx);
        ASSERT_TRUE(cpu_frame.ok()) << cpu_frame.status().to_string();
        ctx.memory = MemoryKind::kDevice;
        DeviceArray<std::byte> out(codecs.gpu->max_frame_bytes(codecs.gpu_stream->desc()));
        auto size = codecs.gpu->encode(0, ctx, gpu_grad, *codecs.gpu_stream, out.span());
        ASSERT_TRUE(size.ok()) << size.status().to_string();
        ASSERT_TRUE(same_bytes(*cpu_frame, out.download(*size))) << "step " << step;
        ASSERT_TRUE(same_bits(codecs.cpu_stream->residual(), codecs.gpu_residual()))
            << "step " << step;
      }
    }
  }
}

class CudaFrameCheckTest : public cuda_test::GpuTest {};

TEST_F(CudaFrameCheckTest, MalformedPayloadsFailLikeTheCpu) {
  struct Corruption {
    std::string spec;
    size_t at;  // payload offset of a value to overwrite
    uint32_t value;
    size_t bytes;
  };
  const Corruption cases[] = {
      {"none", 8, 0x7FC00000u, 4},                   // NaN value
      {"fp16", 2, 0x7C00u, 2},                       // infinity
      {"qsgd:bits=4,workers=8", 0, 0xFF800000u, 4},  // -inf scale
      {"qsgd:bits=4,workers=8", 5, 0x7Fu, 1},        // a level beyond 15
      {"sign", 0, 0xBF800000u, 4},                   // negative scale
  };
  const size_t n = 37;
  for (const Corruption& c : cases) {
    SCOPED_TRACE(c.spec);
    CodecPair codecs(c.spec, n);
    Bytes frame =
        codecs.encode_cpu(make_finite_values(n, 60), context(MemoryKind::kHost, 1)).value();
    std::memcpy(frame.data() + kFrameHeaderBytes + c.at, &c.value, c.bytes);
    test_util::reseal_crc(frame);
    const std::vector<float> acc(n, 1.0f);
    for (bool overwrite : {false, true}) {
      const auto expected = decode_on_cpu(*codecs.cpu, frame, acc, overwrite);
      const auto on_gpu = decode_on_gpu(*codecs.gpu, frame, acc, overwrite);
      ASSERT_FALSE(expected.ok());
      ASSERT_FALSE(on_gpu.ok());
      EXPECT_EQ(on_gpu.status().code(), expected.status().code());
      EXPECT_EQ(on_gpu.status().message(), expected.status().message());
    }
    if (codecs.cpu->summable()) {
      const auto expected = test_util::add_frame_bytes(*codecs.cpu, frame, frame);
      const auto on_gpu = add_on_gpu(*codecs.gpu, frame, frame);
      ASSERT_FALSE(expected.ok());
      EXPECT_EQ(on_gpu.status().code(), expected.status().code());
      EXPECT_EQ(on_gpu.status().message(), expected.status().message());
    }
  }
}

TEST_F(CudaFrameCheckTest, MisalignedBuffersAreRejected) {
  CodecPair codecs("fp16", 16);
  DeviceArray<float> grad{std::span<const float>(make_finite_values(16, 70))};
  DeviceArray<std::byte> out(codecs.gpu->max_frame_bytes(codecs.gpu_stream->desc()) + 4);
  auto size = codecs.gpu->encode(0, context(MemoryKind::kDevice, 1), grad.span(),
                                 *codecs.gpu_stream, out.span().subspan(2));
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(CudaFrameCheckTest, HostMemoryAndCpuStreamsAreRefused) {
  CodecPair codecs("fp16", 16);
  const auto grad = make_finite_values(16, 71);
  DeviceArray<std::byte> out(codecs.gpu->max_frame_bytes(codecs.gpu_stream->desc()));
  auto host_memory =
      codecs.gpu->encode(0, context(MemoryKind::kHost, 1), grad, *codecs.gpu_stream, out.span());
  EXPECT_EQ(host_memory.status().code(), ErrorCode::kUnsupported);
  DeviceArray<float> device_grad{std::span<const float>(grad)};
  auto cpu_stream = codecs.gpu->encode(0, context(MemoryKind::kDevice, 1), device_grad.span(),
                                       *codecs.cpu_stream, out.span());
  EXPECT_EQ(cpu_stream.status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(CudaFrameCheckTest, EveryCodecHasACudaImplementation) {
  for (const char* spec : {"none", "fp16", "bf16", "qsgd", "sign", "topk", "topk:select=exact",
                           "randomk", "powersgd"}) {
    auto codec = make_cuda_codec(parse_codec_spec(spec).value());
    ASSERT_TRUE(codec.ok()) << spec << ": " << codec.status().to_string();
    EXPECT_EQ((*codec)->spec(), format_codec_spec(parse_codec_spec(spec).value()));
  }
}

TEST_F(CudaFrameCheckTest, DeviceStreamsHoldTheirResidualOnTheDevice) {
  CodecPair codecs("bf16", 1000);
  EXPECT_TRUE(codecs.gpu_stream->residual().empty());
  EXPECT_EQ(codecs.gpu_stream->memory_bytes(), 1000 * sizeof(float));
  const auto residual = codecs.gpu_residual();
  EXPECT_EQ(residual, std::vector<float>(1000, 0.0f));
  CodecPair lossless("none", 1000);
  EXPECT_EQ(lossless.gpu_stream->memory_bytes(), 0u);
  EXPECT_TRUE(lossless.gpu_residual().empty());
}

}  // namespace
}  // namespace gradgate::kernels
