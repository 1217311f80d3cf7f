#include "gateway/core/local_reduce.h"

#include <algorithm>
#include <cstring>

#include "gradgate/kernels/half.h"

namespace gradgate::gateway {
namespace {

template <typename Convert>
void add_16bit(const std::byte* data, std::span<float> sum, bool first, Convert convert) {
  for (size_t i = 0; i < sum.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, data + 2 * i, 2);
    const float value = convert(bits);
    sum[i] = first ? value : sum[i] + value;
  }
}

template <typename Convert>
void write_16bit(std::span<const float> values, std::byte* data, Convert convert) {
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = convert(values[i]);
    std::memcpy(data + 2 * i, &bits, 2);
  }
}

}  // namespace

void sum_worker_buffers(std::span<const WorkerBuffer> buffers, Dtype dtype, std::span<float> sum) {
  bool first = true;
  for (const WorkerBuffer& buffer : buffers) {
    if (buffer.data == nullptr) continue;
    switch (dtype) {
      case Dtype::kFp32: {
        const auto* values = reinterpret_cast<const float*>(buffer.data);
        if (first) {
          std::copy(values, values + sum.size(), sum.begin());
        } else {
          for (size_t i = 0; i < sum.size(); ++i) sum[i] += values[i];
        }
        break;
      }
      case Dtype::kFp16:
        add_16bit(buffer.data, sum, first, kernels::fp16_to_float);
        break;
      case Dtype::kBf16:
        add_16bit(buffer.data, sum, first, kernels::bf16_to_float);
        break;
    }
    first = false;
  }
  if (first) std::fill(sum.begin(), sum.end(), 0.0f);
}

void write_worker_buffer(std::span<const float> values, Dtype dtype, WorkerBuffer buffer) {
  switch (dtype) {
    case Dtype::kFp32:
      std::memcpy(buffer.data, values.data(), values.size_bytes());
      return;
    case Dtype::kFp16:
      return write_16bit(values, buffer.data, kernels::float_to_fp16);
    case Dtype::kBf16:
      return write_16bit(values, buffer.data, kernels::float_to_bf16);
  }
}

}  // namespace gradgate::gateway
