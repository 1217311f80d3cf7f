// The tiled kernels' checksum: a kernel that writes a frame's payload body gives each block one
// tile of it. Threads stage the bytes they write in shared memory; each thread then checksums one
// contiguous segment from a zero register, a word at a time with slicing-by-4 tables, and shifts
// it past the rest of the tile with one table-reduced carry-less multiply; the block xors its
// threads' values, shifts the result past the rest of the body and xors it into the frame's CRC
// field (atomically: blocks finish in any order, and xor does not care). The algebra is
// crc32c_combine.h's; the CRC field was seeded by launch_seal_header. PERF_NOTES.md has the costs.
#pragma once

#include <cstdint>

#include "device_tally.cuh"
#include "gradgate/kernels/crc32c_combine.h"
#include "launch.h"

namespace gradgate::kernels::cuda {

inline constexpr int kTileThreads = 128;

/// The slicing tables, copied into each block's shared memory by TileStage::init_table.
__device__ const Crc32cSlices kTileCrcSlices = make_crc32c_slices();

/// Shared memory of a tiled kernel: the CRC tables and the tile's bytes, kSegmentBytes per
/// thread, each segment in a slot of an odd number of words so that the threads reading their own
/// segments hit distinct banks.
template <int kSegmentBytes>
struct TileStage {
  static_assert(kSegmentBytes % 4 == 0, "segments are whole words");
  static constexpr uint32_t kTileBytes = kTileThreads * kSegmentBytes;
  static_assert(kTileBytes <= Crc32cZeros::kSize, "in-tile shifts use one table level");
  static constexpr int kSegmentWords = kSegmentBytes / 4;
  static constexpr int kSlotWords = kSegmentWords | 1;

  Crc32cSlices slices;
  uint32_t words[kTileThreads * kSlotWords];
  uint32_t warp_crc[kTileThreads / 32];

  /// Starts the copy of the tables; fold_crc's barrier makes them visible.
  __device__ void init_table() {
    constexpr int kPerThread = sizeof(Crc32cSlices) / sizeof(uint4) / kTileThreads;
    static_assert(kPerThread * kTileThreads * sizeof(uint4) == sizeof(Crc32cSlices));
    const auto* from = reinterpret_cast<const uint4*>(&kTileCrcSlices);
    auto* to = reinterpret_cast<uint4*>(&slices);
    for (int k = 0; k < kPerThread; ++k)
      to[k * kTileThreads + threadIdx.x] = from[k * kTileThreads + threadIdx.x];
  }

  /// Stages `value` at tile byte `offset` (aligned to its size; never across a segment).
  template <typename T>
  __device__ void put(uint32_t offset, T value) {
    const uint32_t segment = offset / kSegmentBytes;
    auto* slot = reinterpret_cast<unsigned char*>(words + segment * kSlotWords);
    *reinterpret_cast<T*>(slot + offset % kSegmentBytes) = value;
  }

  /// Folds tile bytes [0, tile_bytes), which start `tile_offset` bytes into the body, into the
  /// frame's CRC. All threads of the block call it once the tile is staged.
  __device__ void fold_crc(uint64_t tile_offset, uint32_t tile_bytes, const CrcSink& sink) {
    const uint32_t begin = threadIdx.x * kSegmentBytes;
    const uint32_t end = begin + kSegmentBytes < tile_bytes ? begin + kSegmentBytes : tile_bytes;
    // The shifts' table entries come from global memory: loaded before the barrier, they arrive
    // while the segments are checksummed.
    const Crc32cZeros& zeros = *sink.zeros;
    const uint32_t shift = zeros.level[0][begin < end ? tile_bytes - end : 0];
    const uint64_t after = sink.body_bytes - (tile_offset + tile_bytes);
    uint32_t after_factor[3] = {};
    if (threadIdx.x == 0) {
      for (int l = 0; l < 3; ++l) after_factor[l] = zeros.level[l][Crc32cZeros::digit(after, l)];
    }
    __syncthreads();
    const uint32_t* segment = words + threadIdx.x * kSlotWords;
    uint32_t reg = 0;
    if (end - begin == kSegmentBytes) {
      reg = crc32c_register(slices, segment, kSegmentBytes);  // unrolled
    } else if (begin < end) {
      reg = crc32c_register(slices, segment, end - begin);  // the last tile's short segment
    }
    reg = crc32c_multiply(slices, reg, shift);
    for (int lanes = 16; lanes > 0; lanes /= 2) reg ^= __shfl_xor_sync(kFullWarp, reg, lanes);
    if (threadIdx.x % 32 == 0) warp_crc[threadIdx.x / 32] = reg;
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t tile = 0;
      for (uint32_t crc : warp_crc) tile ^= crc;
      for (uint32_t factor : after_factor) tile = crc32c_multiply(slices, tile, factor);
      atomicXor(sink.slot, tile);
    }
  }
};

/// The first element and the element count of the calling block's tile of `per_tile` elements.
struct TileSpan {
  uint64_t first;
  uint32_t count;
};

__device__ inline TileSpan tile_span(uint64_t n, uint32_t per_tile) {
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * per_tile;
  const uint64_t left = n - first;
  return {first, static_cast<uint32_t>(left < per_tile ? left : per_tile)};
}

inline unsigned tile_blocks(uint64_t n, uint32_t per_tile) {
  return static_cast<unsigned>((n + per_tile - 1) / per_tile);
}

}  // namespace gradgate::kernels::cuda
