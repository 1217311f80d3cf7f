// Frame headers on the device, and the CRC shift table every tiled kernel reads.
#include <array>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "cuda_check.h"
#include "launch.h"

namespace gradgate::kernels::cuda {
namespace {

__device__ const Crc32cZeros kZeros = make_crc32c_zeros();

constexpr uint32_t kCrcWord = 11;  // the CRC field: bytes [44, 48)

struct HeaderWords {
  uint32_t word[kCrcWord];
};

// One thread: the header, the prefix, and the CRC field's seed (crc32c_seed), into which the body
// kernels xor the body's register to make the frame's CRC32C.
__global__ void seal_header_kernel(uint32_t* frame, HeaderWords header, uint32_t header_crc,
                                   Prefix prefix, uint32_t body_zeros) {
  for (uint32_t w = 0; w < kCrcWord; ++w) frame[w] = header.word[w];
  uint32_t reg = ~header_crc;
  if (prefix.bytes != 0) {
    const uint32_t value = prefix.from ? *static_cast<const uint32_t*>(prefix.from) : prefix.value;
    frame[kCrcWord + 1] = value;
    for (int byte = 0; byte < 4; ++byte) {
      reg = crc32c_table_entry((reg ^ (value >> (8 * byte))) & 0xFFu) ^ (reg >> 8);
    }
  }
  frame[kCrcWord] = crc32c_seed(~reg, body_zeros);
}

}  // namespace

Result<const Crc32cZeros*> device_crc32c_zeros() {
  int device = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::unordered_map<int, const Crc32cZeros*> by_device;
  const std::lock_guard lock(mutex);
  if (const auto found = by_device.find(device); found != by_device.end()) return found->second;
  void* address = nullptr;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetSymbolAddress(&address, kZeros));
  const auto* zeros = static_cast<const Crc32cZeros*>(address);
  by_device.emplace(device, zeros);
  return zeros;
}

Status launch_seal_header(std::byte* frame, const FrameHeader& header, const Prefix& prefix,
                          cudaStream_t stream) {
  if (prefix.bytes != 0 && prefix.bytes != 4) {
    return Status(ErrorCode::kInternal, "a frame prefix is 0 or 4 bytes");
  }
  std::array<std::byte, kFrameHeaderBytes> bytes{};
  const uint32_t header_crc = write_frame_header(header, bytes);
  HeaderWords words;
  std::memcpy(words.word, bytes.data(), sizeof words.word);
  const uint64_t body_bytes = header.payload_bytes - prefix.bytes;
  seal_header_kernel<<<1, 1, 0, stream>>>(reinterpret_cast<uint32_t*>(frame), words, header_crc,
                                          prefix, crc32c_zeros(body_bytes));
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

}  // namespace gradgate::kernels::cuda
