// libFuzzer target for the frame parser and every codec's decoder.
//
// The input is used twice: as raw frame bytes (header checks and the CRC), and as a frame built
// from it with a valid CRC, so that the fuzzer reaches the payload validation of every codec:
//   [codec][round][flags][param: 4 bytes][element count - 1: 2 bytes][payload...]
// Every decoder must reject or accept without undefined behaviour, and never write to the output
// when it rejects.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/frame.h"

namespace {

using namespace gradgate::kernels;
using gradgate::CodecId;
using gradgate::kCodecCount;

constexpr size_t kFieldBytes = 9;

void decode_everything(const FrameView& frame) {
  CodecParams params;
  params.id = frame.header.codec;
  auto codec = make_cpu_codec(params);
  if (!codec.ok()) __builtin_trap();
  TensorDesc desc;
  desc.elements = frame.header.element_count;
  auto stream = (*codec)->make_stream(desc);
  if (!stream.ok()) return;
  std::vector<float> acc(desc.elements, 0.0f);
  (void)(*codec)->absorb(frame.header.round, frame, **stream);  // multi-round codecs' state
  const gradgate::Status decoded = (*codec)->decode_accumulate(frame, stream->get(), acc);
  for (float v : acc) {
    if (!decoded.ok() && v != 0.0f) __builtin_trap();  // rejected but wrote to the output
  }
  if ((*codec)->summable()) {
    std::vector<std::byte> sum(kFrameHeaderBytes + frame.payload.size());
    (void)(*codec)->add_frames(frame, frame, sum);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  std::vector<std::byte> raw(bytes, bytes + size);  // aligned copy
  if (auto frame = parse_frame(raw); frame.ok()) decode_everything(*frame);

  if (size < kFieldBytes) return 0;
  FrameHeader h;
  h.codec = static_cast<CodecId>(data[0] % kCodecCount);
  h.round = data[1] % 2;
  h.flags = data[2];
  std::memcpy(&h.param, data + 3, 4);
  uint16_t count_minus_one;
  std::memcpy(&count_minus_one, data + 7, 2);
  h.element_count = uint64_t{count_minus_one} + 1;
  h.payload_bytes = static_cast<uint32_t>(size - kFieldBytes);
  std::vector<std::byte> frame_bytes(kFrameHeaderBytes + h.payload_bytes);
  std::memcpy(frame_bytes.data() + kFrameHeaderBytes, data + kFieldBytes, h.payload_bytes);
  seal_frame(h, frame_bytes);
  auto frame = parse_frame(frame_bytes);
  if (!frame.ok()) __builtin_trap();  // a sealed frame with a valid header must parse
  decode_everything(*frame);
  return 0;
}
