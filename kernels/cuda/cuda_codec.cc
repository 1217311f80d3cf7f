#include "cuda_codec.h"

#include <array>
#include <cstdint>
#include <string>

#include "cuda_check.h"
#include "element_frames.h"
#include "sparse_launch.h"

namespace gradgate::kernels::cuda {
namespace {

constexpr size_t kCrcOffset = 44;

bool aligned4(const void* p) { return reinterpret_cast<uintptr_t>(p) % 4 == 0; }

}  // namespace

Result<std::unique_ptr<Stream>> CudaCodec::make_stream(const TensorDesc& desc) const {
  GRADGATE_RETURN_IF_ERROR(check_tensor(desc));
  auto stream = DeviceStream::make(desc, keeps_residual());
  if (!stream.ok()) return stream.status();
  return std::unique_ptr<Stream>(std::move(stream).value());
}

Result<size_t> CudaCodec::encode_add(int round, const StepContext& ctx, std::span<const float> grad,
                                     Stream& stream, const FrameView& other,
                                     std::span<std::byte> out) const {
  if (!summable()) return add_frames(other, other, out);  // kUnsupported, with the codec's name
  const size_t bytes = max_frame_bytes(stream.desc());
  const auto cuda = static_cast<cudaStream_t>(ctx.cuda_stream);
  void* temporary = nullptr;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&temporary, bytes, cuda));
  const std::span<std::byte> own(static_cast<std::byte*>(temporary), bytes);
  auto sum = [&]() -> Result<size_t> {
    auto size = encode(round, ctx, grad, stream, own);
    if (!size.ok()) return size.status();
    std::array<std::byte, kFrameHeaderBytes> header;
    GRADGATE_RETURN_IF_ERROR(read_device(header.data(), temporary, header.size(), cuda));
    auto parsed = peek_frame_header(header);  // our own frame: no checksum to verify
    if (!parsed.ok()) return parsed.status();
    return add_frames({*parsed, own.subspan(kFrameHeaderBytes, *size - kFrameHeaderBytes)}, other,
                      out);
  }();
  const cudaError_t freed = cudaFreeAsync(temporary, cuda);
  if (sum.ok() && freed != cudaSuccess) {
    return cuda_status(freed, "cudaFreeAsync", __FILE__, __LINE__);
  }
  return sum;
}

Result<CudaCodec::Encode> CudaCodec::begin_encode(int round, const StepContext& ctx,
                                                  std::span<const float> grad, Stream& stream,
                                                  std::span<std::byte> out, size_t frame_bytes,
                                                  size_t prefix_bytes, uint32_t param) const {
  GRADGATE_RETURN_IF_ERROR(check_encode(round, ctx, grad, stream, out, frame_bytes));
  auto* device = dynamic_cast<DeviceStream*>(&stream);
  if (!device) {
    return Status(ErrorCode::kInvalidArgument,
                  spec() + ": the stream was not made by a CUDA codec");
  }
  GRADGATE_RETURN_IF_ERROR(check_aligned(out));
  auto scratch = Scratch::current();
  if (!scratch.ok()) return scratch.status();
  Encode call{{static_cast<cudaStream_t>(ctx.cuda_stream), *scratch}};
  call.stream = device;
  call.residual = device->device_residual();
  call.header = header_of(round, ctx, stream, frame_bytes, 0, param);
  auto sink = crc_sink(out, call.header, prefix_bytes);
  if (!sink.ok()) return sink.status();
  call.sink = *sink;
  GRADGATE_RETURN_IF_ERROR(call.scratch->begin(call.cuda));
  device->set_last_encode_passes(1);
  return call;
}

Result<CudaCodec::Add> CudaCodec::begin_add(
    const FrameView& a, const FrameView& b, std::span<std::byte> out, size_t prefix_bytes,
    const std::function<Status(const FrameView&)>& check) const {
  const size_t bytes = kFrameHeaderBytes + a.payload.size();
  GRADGATE_RETURN_IF_ERROR(check_add(a, b, out, bytes));
  GRADGATE_RETURN_IF_ERROR(check(a));
  GRADGATE_RETURN_IF_ERROR(check(b));
  GRADGATE_RETURN_IF_ERROR(check_aligned(a));
  GRADGATE_RETURN_IF_ERROR(check_aligned(b));
  GRADGATE_RETURN_IF_ERROR(check_aligned(out));
  auto call = begin_call();
  if (!call.ok()) return call.status();
  auto sink = crc_sink(out, a.header, prefix_bytes);
  if (!sink.ok()) return sink.status();
  return Add{std::move(*call), bytes, *sink};
}

Result<Tally> CudaCodec::finish_add(const Call& call, const FrameView& a, const FrameView& b) {
  auto tally = call.scratch->finish(call.cuda);
  if (!tally.ok()) return tally.status();
  GRADGATE_RETURN_IF_ERROR(element_frames::check_finite_values(a, tally->count[0]));
  GRADGATE_RETURN_IF_ERROR(element_frames::check_finite_values(b, tally->count[1]));
  return tally;
}

Status CudaCodec::decode_floats(const FrameView& frame, bool overwrite,
                                const std::function<Status(const Call&)>& count_nonfinite,
                                const std::function<Status(const Call&, bool)>& decode_values) {
  auto call = begin_call();
  if (!call.ok()) return call.status();
  if (!overwrite) {
    GRADGATE_RETURN_IF_ERROR(count_nonfinite(*call));
    auto counted = call->scratch->finish(call->cuda);
    if (!counted.ok()) return counted.status();
    GRADGATE_RETURN_IF_ERROR(element_frames::check_finite_values(frame, counted->count[0]));
  }
  GRADGATE_RETURN_IF_ERROR(decode_values(*call, overwrite));
  auto tally = call->scratch->finish(call->cuda);
  if (!tally.ok()) return tally.status();
  return overwrite ? element_frames::check_finite_values(frame, tally->count[0]) : Status{};
}

Result<CudaCodec::Call> CudaCodec::begin_call() {
  auto scratch = Scratch::current();
  if (!scratch.ok()) return scratch.status();
  Call call{cudaStreamPerThread, *scratch};
  GRADGATE_RETURN_IF_ERROR(call.scratch->begin(call.cuda));
  return call;
}

Result<CrcSink> CudaCodec::crc_sink(std::span<std::byte> out, const FrameHeader& header,
                                    size_t prefix_bytes) {
  auto zeros = device_crc32c_zeros();
  if (!zeros.ok()) return zeros.status();
  return CrcSink{frame_at<uint32_t>(out, kCrcOffset), header.payload_bytes - prefix_bytes, *zeros};
}

Status CudaCodec::check_aligned(const FrameView& frame) const {
  if (!aligned4(frame.payload.data())) {
    return Status(ErrorCode::kInvalidArgument, spec() + ": device frames must be 4-byte aligned");
  }
  return {};
}

Status CudaCodec::check_aligned(std::span<std::byte> out) const {
  if (!aligned4(out.data())) {
    return Status(ErrorCode::kInvalidArgument,
                  spec() + ": device frame buffers must be 4-byte aligned");
  }
  return {};
}

}  // namespace gradgate::kernels::cuda
