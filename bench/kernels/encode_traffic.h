// The memory roofline of the benchmarks: the least bytes an encode must move per element (its
// passes over gradient and residual, and the frame it wrote), and the fraction of the copy
// bandwidth an encode reaches on them. The CPU and the kernel benchmarks both count this way.
#pragma once

#include <cstddef>

#include "gradgate/kernels/codec_spec.h"

namespace gradgate::bench {

/// Bytes per element that an encode of `params` must move in its passes over the gradient and the
/// residual, the payload it writes left out: read g (and read and write e with error feedback),
/// and first a read-only pass for codecs that need a global scale. Both benchmarks build on it.
inline double encode_pass_bytes(const kernels::CodecParams& params) {
  const CodecTraits& codec = codec_traits(params.id);
  const bool ef = params.error_feedback && codec.lossy;
  const double grad_pass = ef ? 12.0 : 4.0;  // read g (+ read and write e)
  const double scale_pass = ef ? 8.0 : 4.0;  // read g (+ read e), writes nothing
  return (codec.scale_pass ? scale_pass : 0.0) + grad_pass;
}

/// Bytes per element of a gradient of `n` elements that an encode of `params` into a frame of
/// `frame_bytes` must read and write at least: its passes and the frame.
inline double least_encode_traffic(const kernels::CodecParams& params, size_t n,
                                   size_t frame_bytes) {
  return encode_pass_bytes(params) + static_cast<double>(frame_bytes) / static_cast<double>(n);
}

/// The fraction of the copy bandwidth (`copy_gbps`: bytes read + written per second, 1e9) that an
/// encode running at `encode_gbps` (gradient bytes, 4 per element, per second) reaches when it
/// moves `traffic_bytes` per element.
inline double roofline_fraction(double encode_gbps, double traffic_bytes, double copy_gbps) {
  return encode_gbps / 4.0 * traffic_bytes / copy_gbps;
}

}  // namespace gradgate::bench
