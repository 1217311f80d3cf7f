// The CUDA randomk codec against the CPU codec: the same frames byte for byte and residuals bit
// for bit, frames that decode and add alike on either side, error feedback over 100 steps, and
// the CPU's errors for non-finite gradients and malformed frames. Every test skips without a CUDA
// device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "codec_data.h"
#include "codec_test_util.h"
#include "cuda_test_util.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/frame.h"

namespace gradgate::kernels {
namespace {

using cuda_test::Bytes;
using cuda_test::CodecPair;
using cuda_test::context;
using cuda_test::SizeAndDensity;
using test_util::make_finite_values;
using test_util::same_bits;
using test_util::same_bytes;

class RandomkCudaTest : public cuda_test::GpuParamTest<SizeAndDensity> {
 protected:
  size_t n() const { return std::get<0>(GetParam()); }
  std::string spec(const char* options = "") const {
    return "randomk:density=" + std::to_string(std::get<1>(GetParam())) + options;
  }
};

TEST_P(RandomkCudaTest, FramesAndResidualsMatchTheCpuCodec) {
  for (const char* options : {"", ",ef=0"}) {
    SCOPED_TRACE(spec(options));
    CodecPair codecs(spec(options), n());
    for (uint64_t step = 0; step < 3; ++step) {
      const auto grad = make_finite_values(n(), 10 + step);
      ASSERT_NO_FATAL_FAILURE(codecs.expect_same_step(grad, context(MemoryKind::kHost, step)));
      EXPECT_EQ(codecs.gpu_passes(), 1);
    }
  }
}

TEST_P(RandomkCudaTest, FramesDecodeAndAddAcrossCpuAndGpu) {
  CodecPair codecs(spec(), n());
  CodecPair other(spec(), n());
  const Bytes a =
      codecs.encode_cpu(make_finite_values(n(), 20), context(MemoryKind::kHost, 1)).value();
  const Bytes b =
      other.encode_cpu(make_finite_values(n(), 21), context(MemoryKind::kHost, 1, 1)).value();
  const auto acc = make_finite_values(n(), 22);
  for (bool overwrite : {false, true}) {
    auto expected = cuda_test::decode_on_cpu(*codecs.cpu, a, acc, overwrite);
    auto on_gpu = cuda_test::decode_on_gpu(*codecs.gpu, a, acc, overwrite);
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().to_string();
    EXPECT_TRUE(same_bits(*expected, *on_gpu));
  }
  auto expected_sum = test_util::add_frame_bytes(*codecs.cpu, a, b);
  auto sum = cuda_test::add_on_gpu(*codecs.gpu, a, b);
  ASSERT_TRUE(sum.ok()) << sum.status().to_string();
  EXPECT_TRUE(same_bytes(*expected_sum, *sum));

  // encode_add: the GPU's own encoding plus b, as on the CPU.
  Bytes expected(codecs.cpu->max_frame_bytes(codecs.cpu_stream->desc()));
  const auto grad = make_finite_values(n(), 23);
  const StepContext ctx = context(MemoryKind::kHost, 1);
  auto cpu_size =
      codecs.cpu->encode_add(0, ctx, grad, *codecs.cpu_stream, parse_frame(b).value(), expected);
  ASSERT_TRUE(cpu_size.ok()) << cpu_size.status().to_string();
  cuda_test::DeviceFrame device_b(b);
  cuda_test::DeviceArray<float> device_grad{std::span<const float>(grad)};
  cuda_test::DeviceArray<std::byte> out(expected.size());
  auto gpu_size = codecs.gpu->encode_add(0, context(MemoryKind::kDevice, 1), device_grad.span(),
                                         *codecs.gpu_stream, device_b.view, out.span());
  ASSERT_TRUE(gpu_size.ok()) << gpu_size.status().to_string();
  expected.resize(*cpu_size);
  EXPECT_TRUE(same_bytes(expected, out.download(*gpu_size)));
}

TEST_P(RandomkCudaTest, ErrorFeedbackInvariantHoldsOver100Steps) {
  if (n() > 100000) GTEST_SKIP() << "100 steps on the smaller sizes";
  CodecPair codecs(spec(), n());
  std::vector<float> residual(n(), 0.0f);
  for (uint64_t step = 0; step < 100; ++step) {
    const auto grad = make_finite_values(n(), 1000 + step);
    auto frame = codecs.encode_gpu(grad, context(MemoryKind::kDevice, step));
    ASSERT_TRUE(frame.ok()) << frame.status().to_string();
    SCOPED_TRACE(step);
    cuda_test::expect_error_feedback(codecs, grad, *frame, residual);
    if (HasFatalFailure()) return;
  }
}

TEST_P(RandomkCudaTest, NonFiniteGradientsFailLikeTheCpuAndKeepTheResidual) {
  CodecPair codecs(spec(), n());
  const auto warm = make_finite_values(n(), 50);
  ASSERT_TRUE(codecs.encode_cpu(warm, context(MemoryKind::kHost, 0)).ok());
  ASSERT_TRUE(codecs.encode_gpu(warm, context(MemoryKind::kDevice, 0)).ok());
  auto grad = test_util::make_values(n(), 51, true);
  grad[n() / 2] = std::numeric_limits<float>::quiet_NaN();
  const auto cpu_frame = codecs.encode_cpu(grad, context(MemoryKind::kHost, 1));
  const auto gpu_frame = codecs.encode_gpu(grad, context(MemoryKind::kDevice, 1));
  ASSERT_FALSE(cpu_frame.ok());
  ASSERT_FALSE(gpu_frame.ok());
  EXPECT_EQ(gpu_frame.status().code(), cpu_frame.status().code());
  EXPECT_EQ(gpu_frame.status().message(), cpu_frame.status().message());
  EXPECT_TRUE(same_bits(codecs.cpu_stream->residual(), codecs.gpu_residual()));
}

INSTANTIATE_TEST_SUITE_P(Sizes, RandomkCudaTest, cuda_test::sizes_and_densities(),
                         cuda_test::size_and_density_name);

class RandomkFrameCheckTest : public cuda_test::GpuTest {};

TEST_F(RandomkFrameCheckTest, MalformedFramesFailLikeTheCpu) {
  const size_t n = 100;
  CodecPair codecs("randomk:density=0.1", n);
  const Bytes good =
      codecs.encode_cpu(make_finite_values(n, 60), context(MemoryKind::kHost, 1)).value();
  Bytes nan_value = good;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan_value.data() + kFrameHeaderBytes + 8 + 4, &nan, 4);
  test_util::reseal_crc(nan_value);
  const std::vector<float> acc(n, 1.0f);
  for (bool overwrite : {false, true}) {
    const auto expected = cuda_test::decode_on_cpu(*codecs.cpu, nan_value, acc, overwrite);
    const auto on_gpu = cuda_test::decode_on_gpu(*codecs.gpu, nan_value, acc, overwrite);
    ASSERT_FALSE(expected.ok());
    ASSERT_FALSE(on_gpu.ok());
    EXPECT_EQ(on_gpu.status().code(), expected.status().code());
    EXPECT_EQ(on_gpu.status().message(), expected.status().message());
  }
  const auto expected = test_util::add_frame_bytes(*codecs.cpu, good, nan_value);
  const auto on_gpu = cuda_test::add_on_gpu(*codecs.gpu, good, nan_value);
  ASSERT_FALSE(on_gpu.ok());
  EXPECT_EQ(on_gpu.status().code(), expected.status().code());
  EXPECT_EQ(on_gpu.status().message(), expected.status().message());

  // Frames of another step were selected with another key.
  const Bytes other_step =
      codecs.encode_cpu(make_finite_values(n, 61), context(MemoryKind::kHost, 2)).value();
  Bytes other_key = good;
  std::memcpy(other_key.data() + kFrameHeaderBytes, other_step.data() + kFrameHeaderBytes, 8);
  test_util::reseal_crc(other_key);
  const auto cpu_keys = test_util::add_frame_bytes(*codecs.cpu, good, other_key);
  const auto gpu_keys = cuda_test::add_on_gpu(*codecs.gpu, good, other_key);
  ASSERT_FALSE(gpu_keys.ok());
  EXPECT_EQ(gpu_keys.status().code(), ErrorCode::kIncompatible);
  EXPECT_EQ(gpu_keys.status().message(), cpu_keys.status().message());
}

}  // namespace
}  // namespace gradgate::kernels
