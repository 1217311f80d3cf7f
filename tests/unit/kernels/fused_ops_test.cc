// The one-pass operations a ring uses (codec.h): encode_add() gives the same frame as encode()
// then add_frames(), and decode() the same values as decode_accumulate() into zeros, for every
// summable codec (none fuses them; the others take the defaults). Their errors name the right
// culprit: a non-finite gradient is the caller's, a non-finite payload the peer's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "codec_test_util.h"
#include "gradient_data.h"

namespace gradgate::kernels {
namespace {

using bench::Dist;
using bench::make_gradient;
using test_util::Bytes;

class FusedOpsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto codec = test_util::make_codec(GetParam());
    ASSERT_TRUE(codec.ok()) << codec.status().to_string();
    codec_ = std::move(codec).value();
    ctx_.step = 4;
    ctx_.job_seed = 99;
    ctx_.agreed_scale = 64.0f;  // qsgd: both frames quantised against the same scale
  }

  // A peer's frame of the same stream and step.
  Bytes peer_frame(const std::vector<float>& grad) {
    auto stream = codec_->make_stream(desc_);
    EXPECT_TRUE(stream.ok());
    auto frame = test_util::encode_frame(*codec_, 0, ctx_, grad, **stream);
    EXPECT_TRUE(frame.ok()) << frame.status().to_string();
    return frame.ok() ? *frame : Bytes{};
  }

  Result<size_t> encode_add(const std::vector<float>& grad, Stream& stream, const Bytes& other,
                            Bytes& out) {
    auto view = parse_frame(other);
    if (!view.ok()) return view.status();
    out.assign(codec_->max_frame_bytes(desc_), std::byte{0});
    return codec_->encode_add(0, ctx_, grad, stream, *view, out);
  }

  // Odd sizes reach the scalar tails; over one block of none's fused loops (8192).
  const TensorDesc desc_ = test_util::matrix_desc(101, 97);
  StepContext ctx_;
  std::unique_ptr<Codec> codec_;
};

TEST_P(FusedOpsTest, EncodeAddIsEncodeThenAddFrames) {
  const auto own = make_gradient(Dist::kLaplace, desc_.elements, 1);
  const Bytes theirs = peer_frame(make_gradient(Dist::kLaplace, desc_.elements, 2));
  auto fused_stream = codec_->make_stream(desc_);
  auto plain_stream = codec_->make_stream(desc_);
  ASSERT_TRUE(fused_stream.ok() && plain_stream.ok());

  Bytes fused;
  auto size = encode_add(own, **fused_stream, theirs, fused);
  ASSERT_TRUE(size.ok()) << size.status().to_string();
  fused.resize(*size);
  auto encoded = test_util::encode_frame(*codec_, 0, ctx_, own, **plain_stream);
  ASSERT_TRUE(encoded.ok());
  auto expected = test_util::add_frame_bytes(*codec_, *encoded, theirs);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  EXPECT_EQ(fused, *expected) << "frames differ (payload or checksum)";
  ASSERT_TRUE(parse_frame(fused).ok());  // sealed with a valid checksum
  const auto fused_residual = (*fused_stream)->residual();
  const auto plain_residual = (*plain_stream)->residual();
  ASSERT_EQ(fused_residual.size(), plain_residual.size());
  // Bit for bit (NaN-free data: element equality is bit equality here); none has no residual.
  EXPECT_TRUE(std::equal(fused_residual.begin(), fused_residual.end(), plain_residual.begin()))
      << "error feedback differs";
}

TEST_P(FusedOpsTest, DecodeOverwritesWithTheDecodedFrame) {
  const Bytes frame = peer_frame(make_gradient(Dist::kStudentT3, desc_.elements, 3));
  auto view = parse_frame(frame);
  ASSERT_TRUE(view.ok());
  std::vector<float> expected(desc_.elements, 0.0f);
  ASSERT_TRUE(codec_->decode_accumulate(*view, nullptr, expected).ok());
  std::vector<float> out(desc_.elements, 123.0f);  // stale values that must not survive
  ASSERT_TRUE(codec_->decode(*view, nullptr, out).ok());
  EXPECT_EQ(out, expected);
}

TEST_P(FusedOpsTest, EncodeAddRejectsAFrameOfAnotherStep) {
  const Bytes theirs = peer_frame(make_gradient(Dist::kLaplace, desc_.elements, 2));
  auto stream = codec_->make_stream(desc_);
  ASSERT_TRUE(stream.ok());
  ctx_.step += 1;
  Bytes out;
  auto size = encode_add(make_gradient(Dist::kLaplace, desc_.elements, 1), **stream, theirs, out);
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), ErrorCode::kIncompatible);
}

TEST_P(FusedOpsTest, EncodeAddBlamesANonFiniteGradientOnTheCaller) {
  const Bytes theirs = peer_frame(make_gradient(Dist::kLaplace, desc_.elements, 2));
  auto own = make_gradient(Dist::kLaplace, desc_.elements, 1);
  own[desc_.elements - 1] = std::numeric_limits<float>::quiet_NaN();
  auto stream = codec_->make_stream(desc_);
  ASSERT_TRUE(stream.ok());
  Bytes out;
  auto size = encode_add(own, **stream, theirs, out);
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), ErrorCode::kNonFiniteGradient) << size.status().to_string();
}

// Only none carries raw floats a peer could make non-finite behind a valid checksum.
TEST(FusedOpsNone, NonFinitePayloadIsThePeersFault) {
  auto codec = test_util::make_codec("none");
  ASSERT_TRUE(codec.ok());
  const TensorDesc desc = test_util::matrix_desc(3, 5000);
  auto stream = (*codec)->make_stream(desc);
  ASSERT_TRUE(stream.ok());
  StepContext ctx;
  auto theirs_grad = make_gradient(Dist::kLaplace, desc.elements, 5);
  theirs_grad[9000] = std::numeric_limits<float>::infinity();
  Bytes theirs(kFrameHeaderBytes + desc.elements * sizeof(float));
  // A frame a lenient peer sealed around an infinity.
  std::memcpy(theirs.data() + kFrameHeaderBytes, theirs_grad.data(), desc.elements * 4);
  FrameHeader header;
  header.codec = CodecId::kNone;
  header.tensor_id = desc.tensor_id;
  header.job_id = desc.job_id;
  header.element_count = desc.elements;
  header.payload_bytes = static_cast<uint32_t>(desc.elements * 4);
  seal_frame(header, theirs);
  auto view = parse_frame(theirs);
  ASSERT_TRUE(view.ok()) << view.status().to_string();

  Bytes out((*codec)->max_frame_bytes(desc));
  const auto own = make_gradient(Dist::kLaplace, desc.elements, 6);
  auto size = (*codec)->encode_add(0, ctx, own, **stream, *view, out);
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), ErrorCode::kMalformedFrame) << size.status().to_string();
  std::vector<float> decoded(desc.elements);
  EXPECT_EQ((*codec)->decode(*view, nullptr, decoded).code(), ErrorCode::kMalformedFrame);
}

std::string spec_name(const ::testing::TestParamInfo<std::string>& info) {
  return test_util::spec_test_name(info.param);
}

// Single-round summable codecs: powersgd's first round needs the shared basis of a whole step.
std::vector<std::string> single_round_summable_specs() {
  std::vector<std::string> specs;
  for (const auto& spec : test_util::specs_where_summable(true)) {
    if ((*test_util::make_codec(spec))->rounds() == 1) specs.push_back(spec);
  }
  return specs;
}

INSTANTIATE_TEST_SUITE_P(SummableCodecs, FusedOpsTest,
                         ::testing::ValuesIn(single_round_summable_specs()), spec_name);

}  // namespace
}  // namespace gradgate::kernels
