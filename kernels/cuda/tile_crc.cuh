// The tiled kernels' checksum: a kernel that writes a frame's payload body gives each block one
// tile of it. Threads stage the bytes they write in shared memory; each thread then checksums one
// contiguous segment from a zero register and shifts it past the rest of the tile; the block xors
// its threads' values, shifts the result past the rest of the body and xors it into the frame's
// CRC field (atomically: blocks finish in any order, and xor does not care). The algebra is
// crc32c_combine.h's; the CRC field was seeded by launch_seal_header.
#pragma once

#include <cstdint>

#include "device_tally.cuh"
#include "gradgate/kernels/crc32c_combine.h"
#include "launch.h"

namespace gradgate::kernels::cuda {

inline constexpr int kTileThreads = 128;

/// Shared memory of a tiled kernel: the CRC byte table and the tile's bytes, kSegmentBytes per
/// thread, each segment in a slot of an odd number of words so that the threads reading their own
/// segments hit distinct banks.
template <int kSegmentBytes>
struct TileStage {
  static_assert(kSegmentBytes % 4 == 0, "segments are whole words");
  static constexpr uint32_t kTileBytes = kTileThreads * kSegmentBytes;
  static_assert(kTileBytes <= Crc32cZeros::kSize, "in-tile shifts use one table level");
  static constexpr int kSegmentWords = kSegmentBytes / 4;
  static constexpr int kSlotWords = kSegmentWords | 1;

  uint32_t table[256];
  uint32_t words[kTileThreads * kSlotWords];
  uint32_t warp_crc[kTileThreads / 32];

  __device__ void init_table() {
    for (int i = threadIdx.x; i < 256; i += kTileThreads) table[i] = crc32c_table_entry(i);
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
    __syncthreads();
    const uint32_t begin = threadIdx.x * kSegmentBytes;
    const uint32_t end = begin + kSegmentBytes < tile_bytes ? begin + kSegmentBytes : tile_bytes;
    uint32_t reg = 0;
    if (begin < end) {
      reg = crc32c_register(table, words + threadIdx.x * kSlotWords, end - begin);
      reg = crc32c_multiply(reg, sink.zeros->level[0][tile_bytes - end]);
    }
    for (int lanes = 16; lanes > 0; lanes /= 2) reg ^= __shfl_xor_sync(kFullWarp, reg, lanes);
    if (threadIdx.x % 32 == 0) warp_crc[threadIdx.x / 32] = reg;
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t tile = 0;
      for (uint32_t crc : warp_crc) tile ^= crc;
      const uint64_t after = sink.body_bytes - (tile_offset + tile_bytes);
      atomicXor(sink.slot, crc32c_multiply(tile, (*sink.zeros)(after)));
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
