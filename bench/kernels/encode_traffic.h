// The memory roofline of the kernel benchmark: the least bytes an encode on the device must move
// per element, and the fraction of the device's copy bandwidth an encode reaches on them. The
// model is the CPU benchmark's (bench/codec_bench.h: read the gradient, read and write the
// residual with error feedback, a read-only pass first for codecs that need a global scale) plus
// the frame written, which matters on the device where the passes themselves are fast.
#pragma once

#include <cstddef>

#include "gradgate/kernels/codec_spec.h"

namespace gradgate::bench {

/// Bytes per element of a gradient of `n` elements that an encode of `params` into a frame of
/// `frame_bytes` must read and write at least.
inline double least_encode_traffic(const kernels::CodecParams& params, size_t n,
                                   size_t frame_bytes) {
  using kernels::CodecId;
  const bool ef = params.error_feedback && params.id != CodecId::kNone;
  const double grad_pass = ef ? 12.0 : 4.0;  // read g (+ read and write e)
  const double scale_pass = ef ? 8.0 : 4.0;  // read g (+ read e), writes nothing
  const bool needs_scale =
      params.id == CodecId::kQsgd || params.id == CodecId::kSign || params.id == CodecId::kPowersgd;
  return (needs_scale ? scale_pass : 0.0) + grad_pass +
         static_cast<double>(frame_bytes) / static_cast<double>(n);
}

/// The fraction of the copy bandwidth (`copy_gbps`: bytes read + written per second, 1e9) that an
/// encode running at `encode_gbps` (gradient bytes, 4 per element, per second) reaches when it
/// moves `traffic_bytes` per element.
inline double roofline_fraction(double encode_gbps, double traffic_bytes, double copy_gbps) {
  return encode_gbps / 4.0 * traffic_bytes / copy_gbps;
}

}  // namespace gradgate::bench
