// Tests of codec specs (gradgate/kernels/codec_spec.h): parse/format round trips for every codec
// and key, the errors of malformed specs, and make_cpu_codec for every codec id.
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/make_codec_for.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/frame.h"

namespace gradgate::kernels {
namespace {

testing::AssertionResult same_params(const CodecParams& a, const CodecParams& b) {
  if (a.id == b.id && a.error_feedback == b.error_feedback && a.bits == b.bits &&
      a.max_workers == b.max_workers && a.density == b.density && a.select == b.select &&
      a.values == b.values && a.rank == b.rank && a.overlap == b.overlap &&
      a.first_pass == b.first_pass) {
    return testing::AssertionSuccess();
  }
  return testing::AssertionFailure()
         << "'" << format_codec_spec(a) << "' (density " << a.density << ") vs '"
         << format_codec_spec(b) << "' (density " << b.density << ")";
}

// One spec per codec with default parameters and specs that set every key.
const std::vector<std::string>& valid_specs() {
  static const std::vector<std::string> specs = {
      "none",
      "fp16",
      "fp16:ef=0",
      "bf16",
      "bf16:ef=0",
      "qsgd",
      "qsgd:bits=1,workers=1",
      "qsgd:bits=8,workers=64,ef=0",
      "qsgd:bits=15,workers=65535",
      "sign",
      "sign:ef=0",
      "topk",
      "topk:density=0.01,select=threshold,values=fp32",
      "topk:density=0.5,select=exact,values=fp16,ef=0",
      "topk:density=1",
      "topk:density=1e-06",
      "topk:density=0.01,overlap=0.5",
      "topk:density=0.01,first_pass=staged",
      "randomk",
      "randomk:density=0.25",
      "randomk:density=0.001,ef=0",
      "powersgd",
      "powersgd:rank=1",
      "powersgd:rank=64,ef=0",
  };
  return specs;
}

// ---- round trips -----------------------------------------------------------------------------

TEST(CodecSpecTest, ParseFormatRoundTripsEveryCodecAndKey) {
  for (const std::string& spec : valid_specs()) {
    SCOPED_TRACE(spec);
    auto parsed = parse_codec_spec(spec);
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    const std::string formatted = format_codec_spec(*parsed);
    auto reparsed = parse_codec_spec(formatted);
    ASSERT_TRUE(reparsed.ok()) << formatted << ": " << reparsed.status().to_string();
    EXPECT_TRUE(same_params(*parsed, *reparsed));
    EXPECT_EQ(format_codec_spec(*reparsed), formatted) << "the formatted spec is canonical";
  }
}

TEST(CodecSpecTest, ParsesEveryKeysValue) {
  auto topk = parse_codec_spec("topk:density=0.125,select=exact,values=fp16,ef=0,overlap=0.25");
  ASSERT_TRUE(topk.ok()) << topk.status().to_string();
  EXPECT_EQ(topk->overlap, 0.25);
  EXPECT_EQ(topk->id, CodecId::kTopk);
  EXPECT_EQ(topk->density, 0.125);
  EXPECT_EQ(topk->select, TopkSelect::kExact);
  EXPECT_EQ(topk->values, ValueType::kFp16);
  EXPECT_FALSE(topk->error_feedback);

  auto qsgd = parse_codec_spec("qsgd:workers=16,bits=3");  // any key order
  ASSERT_TRUE(qsgd.ok()) << qsgd.status().to_string();
  EXPECT_EQ(qsgd->bits, 3);
  EXPECT_EQ(qsgd->max_workers, 16);
  EXPECT_TRUE(qsgd->error_feedback);

  auto powersgd = parse_codec_spec("powersgd:rank=7,ef=1");
  ASSERT_TRUE(powersgd.ok()) << powersgd.status().to_string();
  EXPECT_EQ(powersgd->rank, 7);
  EXPECT_TRUE(powersgd->error_feedback);

  auto defaults = parse_codec_spec("topk");
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(same_params(*defaults, CodecParams{.id = CodecId::kTopk}));
}

TEST(CodecSpecTest, FormatWritesOnlyTheKeysOfTheCodec) {
  EXPECT_EQ(format_codec_spec({.id = CodecId::kNone}), "none");
  EXPECT_EQ(format_codec_spec({.id = CodecId::kFp16}), "fp16");
  EXPECT_EQ(format_codec_spec({.id = CodecId::kSign, .error_feedback = false}), "sign:ef=0");
  EXPECT_EQ(format_codec_spec({.id = CodecId::kQsgd, .bits = 2, .max_workers = 4}),
            "qsgd:bits=2,workers=4");
  EXPECT_EQ(format_codec_spec({.id = CodecId::kRandomk, .density = 0.25}), "randomk:density=0.25");
  EXPECT_EQ(format_codec_spec({.id = CodecId::kPowersgd, .rank = 8}), "powersgd:rank=8");
}

TEST(CodecSpecTest, FormattedDensityRoundTripsExactly) {
  // Codec::spec() identifies a codec to peers that parse it back: the density, and with it k,
  // must survive the round trip bit for bit.
  for (double density : {1.0 / 3.0, 0.0123456789, 0.1 + 0.2, 2.5e-7, 0.999999999}) {
    for (CodecId id : {CodecId::kTopk, CodecId::kRandomk}) {
      const CodecParams params{.id = id, .density = density};
      const std::string formatted = format_codec_spec(params);
      auto reparsed = parse_codec_spec(formatted);
      ASSERT_TRUE(reparsed.ok()) << formatted << ": " << reparsed.status().to_string();
      EXPECT_TRUE(same_params(params, *reparsed)) << "formatted as '" << formatted << "'";
    }
  }
}

// ---- errors ----------------------------------------------------------------------------------

struct BadSpec {
  const char* spec;
  const char* named;  // what the message must name
};

TEST(CodecSpecTest, MalformedSpecsAreInvalidArgumentsNamingTheKey) {
  const BadSpec cases[] = {
      // Unknown codec.
      {"zstd", "zstd"},
      {"", "codec"},
      {"TopK:density=0.1", "TopK"},
      {"topk ", "topk "},
      // Unknown key, and keys of another codec.
      {"topk:foo=1", "foo"},
      {"topk:bits=4", "bits"},
      {"qsgd:density=0.1", "density"},
      {"qsgd:rank=2", "rank"},
      {"fp16:rank=2", "rank"},
      {"randomk:select=exact", "select"},
      {"powersgd:values=fp16", "values"},
      {"none:ef=0", "ef"},
      {"sign:density=0.5", "density"},
      {"randomk:overlap=0.5", "overlap"},
      // Empty items and repeated keys.
      {"topk:", "KEY=VALUE"},
      {"topk:density=0.1,", "KEY=VALUE"},
      {"qsgd:bits=4,bits=2", "bits"},
      // Bad values.
      {"qsgd:bits=four", "bits"},
      {"qsgd:bits=4x", "bits"},
      {"qsgd:bits=", "bits"},
      {"qsgd:bits=99999999999", "bits"},
      {"qsgd:workers=-", "workers"},
      {"topk:density=abc", "density"},
      {"topk:density=0.1.2", "density"},
      {"topk:select=fast", "select"},
      {"topk:values=fp8", "values"},
      {"topk:first_pass=fastest", "first_pass"},
      {"randomk:first_pass=staged", "first_pass"},
      {"topk:ef=2", "ef"},
      {"fp16:ef=yes", "ef"},
      {"powersgd:rank=2.5", "rank"},
      // Out of range.
      {"qsgd:bits=0", "bits"},
      {"qsgd:bits=16", "bits"},
      {"qsgd:bits=-1", "bits"},
      {"qsgd:workers=0", "workers"},
      {"qsgd:workers=65536", "workers"},
      {"topk:density=0", "density"},
      {"topk:density=1.5", "density"},
      {"topk:density=-0.1", "density"},
      {"topk:density=nan", "density"},
      {"topk:density=inf", "density"},
      {"randomk:density=0", "density"},
      {"randomk:density=2", "density"},
      {"topk:overlap=1", "overlap"},
      {"topk:overlap=-0.1", "overlap"},
      {"powersgd:rank=0", "rank"},
      {"powersgd:rank=65", "rank"},
      // Missing '=' or key.
      {"topk:density", "density"},
      {"topk:density=0.1,select", "select"},
      {"topk:=0.1", "=0.1"},
      {"topk:density=0.1,,select=exact", "KEY=VALUE"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string("spec '") + c.spec + "'");
    auto parsed = parse_codec_spec(c.spec);
    ASSERT_FALSE(parsed.ok()) << "accepted as " << format_codec_spec(*parsed);
    EXPECT_EQ(parsed.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(c.named), std::string::npos)
        << "message: " << parsed.status().message();
  }
}

TEST(CodecSpecTest, ValidateRejectsOutOfRangeParams) {
  const CodecParams cases[] = {
      {.id = CodecId::kQsgd, .bits = 0},
      {.id = CodecId::kQsgd, .bits = 16},
      {.id = CodecId::kQsgd, .max_workers = 0},
      {.id = CodecId::kTopk, .density = 0.0},
      {.id = CodecId::kTopk, .density = std::nan("")},
      {.id = CodecId::kRandomk, .density = 1.0000001},
      {.id = CodecId::kPowersgd, .rank = 65},
  };
  for (const auto& params : cases) {
    SCOPED_TRACE(format_codec_spec(params));
    EXPECT_EQ(validate_codec_params(params).code(), ErrorCode::kInvalidArgument);
    auto codec = make_cpu_codec(params);
    ASSERT_FALSE(codec.ok());
    EXPECT_EQ(codec.status().code(), ErrorCode::kInvalidArgument);
  }
}

// ---- make_cpu_codec --------------------------------------------------------------------------

TEST(CodecSpecTest, CodecNamesRoundTrip) {
  for (int i = 0; i < kCodecCount; ++i) {
    const auto id = static_cast<CodecId>(i);
    auto back = codec_from_name(codec_name(id));
    ASSERT_TRUE(back.ok()) << codec_name(id);
    EXPECT_EQ(*back, id);
  }
  EXPECT_EQ(codec_name(static_cast<CodecId>(kCodecCount)), "unknown");
  EXPECT_FALSE(codec_from_name("unknown").ok());
}

// One step of the codec.h protocol on a single worker; returns the decoded gradient.
std::vector<float> one_step(const Codec& codec, Stream& stream, std::span<const float> grad) {
  StepContext ctx{.step = 1, .job_seed = 5};
  if (codec.needs_agreed_scale()) ctx.agreed_scale = codec.local_scale(grad, stream);
  std::vector<std::byte> frame(codec.max_frame_bytes(stream.desc()));
  size_t size = 0;
  for (int round = 0; round < codec.rounds(); ++round) {
    auto encoded = codec.encode(round, ctx, grad, stream, frame);
    EXPECT_TRUE(encoded.ok()) << "round " << round << ": " << encoded.status().to_string();
    if (!encoded.ok()) return {};
    size = *encoded;
    if (codec.rounds() > 1) {
      auto view = parse_frame({frame.data(), size});
      EXPECT_TRUE(view.ok()) << view.status().to_string();
      if (!view.ok()) return {};
      const Status absorbed = codec.absorb(round, *view, stream);
      EXPECT_TRUE(absorbed.ok()) << absorbed.to_string();
    }
  }
  std::vector<float> decoded(grad.size(), 0.0f);
  auto view = parse_frame({frame.data(), size});
  EXPECT_TRUE(view.ok()) << view.status().to_string();
  if (!view.ok()) return {};
  const Status st = codec.decode_accumulate(*view, &stream, decoded);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return decoded;
}

TEST(CodecSpecTest, MakeCpuCodecWorksForEverySpec) {
  std::vector<bool> seen(kCodecCount, false);
  std::vector<float> grad(12 * 16);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = std::sin(0.37f * static_cast<float>(i));
  for (const std::string& spec : valid_specs()) {
    SCOPED_TRACE(spec);
    const auto params = parse_codec_spec(spec);
    ASSERT_TRUE(params.ok()) << params.status().to_string();
    auto codec = make_cpu_codec(*params);
    ASSERT_TRUE(codec.ok()) << codec.status().to_string();
    const Codec& c = **codec;
    seen[static_cast<size_t>(c.id())] = true;
    EXPECT_EQ(c.id(), params->id);
    EXPECT_EQ(c.spec(), format_codec_spec(*params));
    EXPECT_EQ(c.rounds(), params->id == CodecId::kPowersgd ? 2 : 1);
    const TensorDesc desc{
        .job_id = 1, .tensor_id = 2, .elements = grad.size(), .rows = 12, .cols = 16};
    EXPECT_GT(c.max_frame_bytes(desc), kFrameHeaderBytes);
    auto stream = c.make_stream(desc);
    ASSERT_TRUE(stream.ok()) << stream.status().to_string();
    const auto decoded = one_step(c, **stream, grad);
    ASSERT_EQ(decoded.size(), grad.size());
    for (float v : decoded) ASSERT_TRUE(std::isfinite(v));
  }
  for (int i = 0; i < kCodecCount; ++i) {
    EXPECT_TRUE(seen[static_cast<size_t>(i)]) << codec_name(static_cast<CodecId>(i));
  }
}

TEST(CodecSpecTest, MakeCpuCodecRejectsAnUnknownId) {
  auto codec = make_cpu_codec({.id = static_cast<CodecId>(kCodecCount)});
  ASSERT_FALSE(codec.ok());
  EXPECT_EQ(codec.status().code(), ErrorCode::kInvalidArgument);
}

TEST(CodecSpecTest, MakeCodecForPicksTheCpuCodecForHostMemory) {
  for (MemoryKind memory : {MemoryKind::kHost, MemoryKind::kPinned}) {
    auto codec = make_codec_for(parse_codec_spec("fp16").value(), memory);
    ASSERT_TRUE(codec.ok()) << codec.status().to_string();
    auto stream = (*codec)->make_stream({.elements = 4});
    ASSERT_TRUE(stream.ok());
    std::vector<float> grad = {1.0f, -2.0f, 0.5f, 0.0f};
    std::vector<std::byte> out((*codec)->max_frame_bytes((*stream)->desc()));
    StepContext ctx;
    ctx.memory = memory;
    EXPECT_TRUE((*codec)->encode(0, ctx, grad, **stream, out).ok());  // reads host memory
    EXPECT_EQ((*stream)->residual().size(), grad.size());
  }
}

TEST(CodecSpecTest, MakeCodecForDeviceMemoryIsTheCudaCodecOrUnsupported) {
  // Without CUDA in the build, or without a device, kUnsupported says so; overlap-seeking top-k
  // has no CUDA codec.
  auto fp16 = make_codec_for(parse_codec_spec("fp16").value(), MemoryKind::kDevice);
  if (!fp16.ok()) {
    EXPECT_EQ(fp16.status().code(), ErrorCode::kUnsupported);
    EXPECT_NE(fp16.status().message().find("fp16"), std::string::npos);
  }
  auto topk = make_codec_for(parse_codec_spec("topk:overlap=0.5").value(), MemoryKind::kDevice);
  ASSERT_FALSE(topk.ok());
  EXPECT_EQ(topk.status().code(), ErrorCode::kUnsupported);
  auto invalid = make_codec_for({.id = CodecId::kQsgd, .bits = 0}, MemoryKind::kDevice);
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(invalid.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace gradgate::kernels
