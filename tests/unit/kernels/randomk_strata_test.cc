// The host-device random-k selection of the CUDA codec (kernels/cuda/randomk_strata.h) against
// the CPU randomk codec: the same key and, stratum by stratum, the same elements.
#include "randomk_strata.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/frame.h"

namespace gradgate::kernels::cuda::randomk {
namespace {

TEST(RandomkStrataTest, TheCpuCodecSendsTheElementsOfTheStrata) {
  for (size_t n : {1u, 7u, 1000u, 65539u}) {
    for (double density : {0.5, 0.01}) {
      SCOPED_TRACE(testing::Message() << "n " << n << " density " << density);
      CodecParams params = parse_codec_spec("randomk").value();
      params.density = density;
      auto codec = make_cpu_codec(params).value();
      TensorDesc desc;
      desc.job_id = 3;
      desc.tensor_id = 11;
      desc.elements = n;
      auto stream = codec->make_stream(desc).value();
      std::vector<float> grad(n);
      for (size_t i = 0; i < n; ++i) grad[i] = static_cast<float>(i) + 1.0f;  // value = index + 1
      StepContext ctx;
      ctx.step = 41;
      ctx.job_seed = 0x5EED;
      std::vector<std::byte> out(codec->max_frame_bytes(desc));
      const size_t size = codec->encode(0, ctx, grad, *stream, out).value();
      const FrameView frame = parse_frame(std::span(out).first(size)).value();
      uint64_t key = 0;
      std::memcpy(&key, frame.payload.data(), sizeof key);
      EXPECT_EQ(key, selection_key(ctx.job_seed, desc.tensor_id, ctx.step));
      const size_t k = (frame.payload.size() - 8) / 4;
      for (size_t j = 0; j < k; ++j) {
        float value = 0.0f;
        std::memcpy(&value, frame.payload.data() + 8 + 4 * j, sizeof value);
        const uint32_t i = stratum_index(j, k, n, key);
        ASSERT_EQ(value, static_cast<float>(i) + 1.0f) << "stratum " << j;
        ASSERT_GE(i, j * n / k);
        ASSERT_LT(i, (j + 1) * n / k);
      }
    }
  }
}

}  // namespace
}  // namespace gradgate::kernels::cuda::randomk
