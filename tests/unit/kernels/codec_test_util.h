// Helpers shared by the codec tests: the codec specs that generic tests run over, frame buffers,
// and a driver that runs one full step of the codec.h protocol over several workers.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/crc32c.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/wire_io.h"
#include "loops.h"

namespace gradgate::kernels::test_util {

using Bytes = std::vector<std::byte>;

/// Every codec, with each parameter family that changes its wire format or selection.
inline const std::vector<std::string>& codec_specs() {
  static const std::vector<std::string> specs = {
      "none",
      "fp16",
      "bf16",
      "qsgd:bits=4,workers=8",
      "qsgd:bits=8,workers=64",
      "sign",
      "topk:density=0.01",
      "topk:density=0.1,select=exact",
      "topk:density=0.01,values=fp16",
      "randomk:density=0.05",
      "powersgd:rank=4",
  };
  return specs;
}

/// The specs of codec_specs() whose codecs are (or are not) summable.
inline std::vector<std::string> specs_where_summable(bool summable) {
  std::vector<std::string> out;
  for (const auto& spec : codec_specs()) {
    auto codec = make_cpu_codec(parse_codec_spec(spec).value());
    if (codec.ok() && (*codec)->summable() == summable) out.push_back(spec);
  }
  return out;
}

/// A GoogleTest-safe name for a spec: "topk:density=0.01" -> "topk_density_0_01".
inline std::string spec_test_name(std::string_view spec) {
  std::string name(spec);
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); },
      '_');
  return name;
}

/// The CPU codec of a spec string.
inline Result<std::unique_ptr<Codec>> make_codec(std::string_view spec) {
  auto params = parse_codec_spec(spec);
  if (!params.ok()) return params.status();
  return make_cpu_codec(*params);
}

/// A rows x cols tensor (powersgd uses the shape; the other codecs only the element count).
inline TensorDesc matrix_desc(size_t rows, size_t cols, uint32_t job_id = 3,
                              uint32_t tensor_id = 7) {
  TensorDesc desc;
  desc.job_id = job_id;
  desc.tensor_id = tensor_id;
  desc.elements = rows * cols;
  desc.rows = rows;
  desc.cols = cols;
  return desc;
}

/// `count` fresh streams of `codec` for `desc`.
inline Result<std::vector<std::unique_ptr<Stream>>> make_streams(const Codec& codec,
                                                                 const TensorDesc& desc,
                                                                 size_t count) {
  std::vector<std::unique_ptr<Stream>> streams;
  for (size_t w = 0; w < count; ++w) {
    auto stream = codec.make_stream(desc);
    if (!stream.ok()) return stream.status();
    streams.push_back(std::move(stream).value());
  }
  return streams;
}

/// Raw pointers to `streams`, for run_step().
inline std::vector<Stream*> stream_pointers(const std::vector<std::unique_ptr<Stream>>& streams) {
  std::vector<Stream*> pointers;
  for (const auto& stream : streams) pointers.push_back(stream.get());
  return pointers;
}

/// Encodes one round of one worker into a buffer of exactly the frame's size.
inline Result<Bytes> encode_frame(const Codec& codec, int round, const StepContext& ctx,
                                  std::span<const float> grad, Stream& stream) {
  Bytes out(codec.max_frame_bytes(stream.desc()));
  auto size = codec.encode(round, ctx, grad, stream, out);
  if (!size.ok()) return size.status();
  out.resize(*size);
  return out;
}

/// add_frames() of two frame buffers, into a buffer of exactly the sum's size.
inline Result<Bytes> add_frame_bytes(const Codec& codec, const Bytes& a, const Bytes& b) {
  auto fa = parse_frame(a);
  if (!fa.ok()) return fa.status();
  auto fb = parse_frame(b);
  if (!fb.ok()) return fb.status();
  Bytes out(std::max(a.size(), b.size()));
  auto size = codec.add_frames(*fa, *fb, out);
  if (!size.ok()) return size.status();
  out.resize(*size);
  return out;
}

/// Parses a frame buffer and adds its decoding to `acc`.
inline Status decode_frame(const Codec& codec, const Bytes& frame, const Stream* stream,
                           std::span<float> acc) {
  auto view = parse_frame(frame);
  if (!view.ok()) return view.status();
  return codec.decode_accumulate(*view, stream, acc);
}

/// Everything one protocol step produced.
struct StepOutput {
  float agreed_scale = 0.0f;
  std::vector<std::vector<Bytes>> frames;   // frames[round][worker]
  std::vector<Bytes> sums;                  // sums[round]: add_frames() over workers (summable)
  std::vector<std::vector<float>> decoded;  // decoded[worker]: the aggregate that worker decoded
};

/// Runs one step of the codec.h protocol for streams.size() workers: worker w encodes grads[w]
/// with its own stream and ctx.worker = w. For summable codecs the frames of each round are
/// summed with an add_frames() chain (worker 0 + 1, then + 2, ...) and every worker absorbs and
/// decodes that sum; otherwise every worker decodes every worker's last-round frame, in rank
/// order, into its accumulator. Returns the first error of any call.
inline Result<StepOutput> run_step(const Codec& codec, std::span<Stream* const> streams,
                                   std::span<const std::vector<float>> grads, StepContext ctx) {
  const size_t workers = streams.size();
  if (workers == 0 || grads.size() != workers) {
    return Status(ErrorCode::kInvalidArgument, "run_step needs one gradient per worker");
  }
  StepOutput out;
  if (codec.needs_agreed_scale()) {
    for (size_t w = 0; w < workers; ++w) {
      out.agreed_scale = std::max(out.agreed_scale, codec.local_scale(grads[w], *streams[w]));
    }
  }
  ctx.agreed_scale = out.agreed_scale;
  for (int round = 0; round < codec.rounds(); ++round) {
    auto& frames = out.frames.emplace_back();
    for (size_t w = 0; w < workers; ++w) {
      ctx.worker = static_cast<uint32_t>(w);
      auto frame = encode_frame(codec, round, ctx, grads[w], *streams[w]);
      if (!frame.ok()) return frame.status();
      frames.push_back(std::move(frame).value());
    }
    if (!codec.summable()) continue;
    Bytes sum = frames[0];
    for (size_t w = 1; w < workers; ++w) {
      auto next = add_frame_bytes(codec, sum, frames[w]);
      if (!next.ok()) return next.status();
      sum = std::move(next).value();
    }
    if (codec.rounds() > 1) {
      auto view = parse_frame(sum);
      if (!view.ok()) return view.status();
      for (size_t w = 0; w < workers; ++w) {
        GRADGATE_RETURN_IF_ERROR(codec.absorb(round, *view, *streams[w]));
      }
    }
    out.sums.push_back(std::move(sum));
  }
  for (size_t w = 0; w < workers; ++w) {
    std::vector<float>& acc = out.decoded.emplace_back(streams[w]->desc().elements, 0.0f);
    if (codec.summable()) {
      GRADGATE_RETURN_IF_ERROR(decode_frame(codec, out.sums.back(), streams[w], acc));
    } else {
      for (const Bytes& frame : out.frames.back()) {
        GRADGATE_RETURN_IF_ERROR(decode_frame(codec, frame, streams[w], acc));
      }
    }
  }
  return out;
}

/// Rewrites the CRC32C at offset 44 over bytes [0, 44) and [48, end): the frame then passes the
/// checksum whatever else was changed (header fields included).
inline void reseal_crc(std::span<std::byte> frame) {
  constexpr size_t kCrcOffset = 44;
  const uint32_t crc =
      crc32c_extend(crc32c(frame.first(kCrcOffset)), frame.subspan(kFrameHeaderBytes));
  wire::store<uint32_t>(frame.data() + kCrcOffset, crc);
}

/// Forces an instruction set for the loops of the CPU codecs while in scope.
class ScopedIsa {
 public:
  explicit ScopedIsa(cpu::Isa isa) { cpu::force_isa(isa); }
  ~ScopedIsa() { cpu::force_isa(cpu::best_isa()); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;
};

}  // namespace gradgate::kernels::test_util
