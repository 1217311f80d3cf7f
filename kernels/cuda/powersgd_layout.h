// powersgd's matrix view and frame layout on the host side, as the CPU codec
// (kernels/cpu/powersgd_codec.cc) defines them: the shape a tensor is compressed as, its rank, the
// payload size, and the checks of a frame's header and shape prefix, with the CPU codec's errors
// and messages. The CUDA codec reads a device frame's shape prefix back and checks it here, so
// both codecs accept the same frames; the host tests hold these rules against the CPU codec.
//
// Payload: [u32 rows][u32 cols][f32 values, dim x rank, row-major], dim = rows in round 0 (P)
// and cols in round 1 (Q); the frame's param is the rank, its flags are zero.
//
// Pure functions: no state, safe anywhere.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "element_frames.h"  // malformed_frame
#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/frame.h"
#include "powersgd_math.h"  // kMaxRank

namespace gradgate::kernels::cuda::powersgd {

inline constexpr size_t kShapeBytes = 2 * sizeof(uint32_t);

/// A tensor as a rows x cols row-major matrix, zero-padded at the end, compressed at `rank`.
struct Shape {
  uint64_t rows = 0;
  uint64_t cols = 0;
  uint64_t rank = 0;
};

/// The least root with root^2 >= n.
inline uint64_t ceil_sqrt(uint64_t n) {
  auto root = static_cast<uint64_t>(std::sqrt(static_cast<double>(n)));
  while (root > 0 && root * root >= n) --root;
  while (root * root < n) ++root;
  return root;
}

/// The 1-D rule: cols = ceil(sqrt(n)), rows = ceil(n / cols).
inline Shape one_d_shape(uint64_t n) {
  const uint64_t cols = std::max<uint64_t>(1, ceil_sqrt(n));
  return {std::max<uint64_t>(1, (n + cols - 1) / cols), cols, 0};
}

/// r = min(rank, rows, cols), with `rank` clamped to [1, kMaxRank].
inline uint64_t rank_for(const Shape& shape, int rank) {
  return std::min<uint64_t>({static_cast<uint64_t>(std::clamp(rank, 1, static_cast<int>(kMaxRank))),
                             shape.rows, shape.cols});
}

/// desc.rows x desc.cols when both are set (their product must be the element count), else the
/// 1-D rule; with the rank for `rank`.
inline Result<Shape> matrix_shape(const TensorDesc& desc, int rank) {
  Shape shape = one_d_shape(desc.elements);
  if (desc.rows != 0 || desc.cols != 0) {
    if (desc.rows == 0 || desc.cols == 0 || desc.elements % desc.cols != 0 ||
        desc.rows != desc.elements / desc.cols) {
      return Status(ErrorCode::kInvalidArgument,
                    "powersgd: matrix shape " + std::to_string(desc.rows) + " x " +
                        std::to_string(desc.cols) + " does not hold the tensor's " +
                        std::to_string(desc.elements) +
                        " elements (give both rows and cols, or neither)");
    }
    shape = {desc.rows, desc.cols, 0};
  }
  shape.rank = rank_for(shape, rank);
  return shape;
}

/// Payload bytes of a frame carrying a dim x rank factor.
inline uint64_t payload_bytes(uint64_t dim, uint64_t rank) {
  return kShapeBytes + sizeof(float) * dim * rank;
}

/// The larger of the two frames of a stream of `shape`, header included.
inline uint64_t max_frame_bytes(const Shape& shape) {
  return kFrameHeaderBytes + payload_bytes(std::max(shape.rows, shape.cols), shape.rank);
}

/// The checks that need only the header and the payload's length: flags, round, rank, room for
/// the shape prefix.
inline Status check_header(const FrameView& frame) {
  const FrameHeader& h = frame.header;
  if (h.flags != 0) return malformed_frame(frame, "unknown flags");
  if (h.round > 1) return malformed_frame(frame, "round out of range");
  if (h.param < 1 || h.param > kMaxRank) {
    return malformed_frame(frame, "rank " + std::to_string(h.param) + " is out of [1, 64]");
  }
  if (frame.payload.size() < kShapeBytes) {
    return malformed_frame(frame, "payload is shorter than its shape prefix");
  }
  return {};
}

/// The frame's shape prefix (rows, cols) against its element count, its rank against the shape,
/// and its length against both; then the count of NaN or infinite values in its payload. Returns
/// the shape after check_header passed.
inline Result<Shape> check_shape(const FrameView& frame, uint32_t rows32, uint32_t cols32,
                                 uint64_t nonfinite) {
  const uint64_t rows = rows32, cols = cols32, rank = frame.header.param;
  const uint64_t n = frame.header.element_count;
  if (rows == 0 || cols == 0 || rows * cols < n || (rows - 1) * cols >= n) {
    return malformed_frame(frame, "matrix shape " + std::to_string(rows) + " x " +
                                      std::to_string(cols) + " does not fit " + std::to_string(n) +
                                      " elements with less than one row of padding");
  }
  if (rank > std::min(rows, cols)) {
    return malformed_frame(frame, "rank " + std::to_string(rank) + " exceeds the matrix shape");
  }
  const uint64_t dim = frame.header.round == 0 ? rows : cols;
  if (frame.payload.size() != payload_bytes(dim, rank)) {
    return malformed_frame(frame, "payload is not the shape and " + std::to_string(dim) + " x " +
                                      std::to_string(rank) + " fp32 values");
  }
  if (nonfinite != 0) return malformed_frame(frame, "payload holds NaN or infinite values");
  return Shape{rows, cols, rank};
}

/// kInvalidArgument unless a frame of `frame_shape` belongs to the stream of `stream_shape` and
/// `elements`; `spec` names the codec.
inline Status check_stream_matches(const std::string& spec, const FrameView& frame,
                                   const Shape& frame_shape, uint64_t elements,
                                   const Shape& stream_shape) {
  if (frame.header.element_count != elements || frame_shape.rows != stream_shape.rows ||
      frame_shape.cols != stream_shape.cols || frame_shape.rank != stream_shape.rank) {
    return Status(
        ErrorCode::kInvalidArgument,
        spec + ": frame of a " + std::to_string(frame_shape.rows) + " x " +
            std::to_string(frame_shape.cols) + " rank-" + std::to_string(frame_shape.rank) +
            " matrix does not match the stream's " + std::to_string(stream_shape.rows) + " x " +
            std::to_string(stream_shape.cols) + " rank-" + std::to_string(stream_shape.rank));
  }
  return {};
}

}  // namespace gradgate::kernels::cuda::powersgd
