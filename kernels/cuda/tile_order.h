// The tile layout of topk's ordered compactions (its first pass and keep) and the rank of each
// flagged item within its tile, kept apart from the kernels so that it runs and is tested on the
// CPU.
//
// A tile is kThreads threads x kRows rows x kLanes consecutive items: item (row, lane) of thread t
// is item kLanes * (t + kThreads * row) + lane of the tile, so that a row is one 16-byte access
// per thread (float4, uint4), coalesced across the block. In index order a tile runs row by row
// and, within a row, thread by thread. Each thread counts its flagged items per row and packs the
// counts kRowBits to a row into one 64-bit word: one block-wide exclusive sum of the words ranks
// every flagged item of the tile in index order, so the compacted list needs no sort.
//
// Header-only and free of CUDA, pure functions: safe anywhere.
#pragma once

#include <cstdint>

#include "gradgate/kernels/half.h"  // GRADGATE_HOST_DEVICE

namespace gradgate::kernels::cuda::tile_order {

inline constexpr uint32_t kThreads = 256;
inline constexpr int kRows = 4;
inline constexpr int kLanes = 4;
inline constexpr int kItems = kRows * kLanes;         // per thread and tile
inline constexpr uint32_t kTile = kThreads * kItems;  // items per tile
inline constexpr int kRowBits = 16;                   // per row in a packed count
static_assert(kThreads * kLanes < (1u << kRowBits), "a row's count must fit its field");
static_assert(kRows * kRowBits <= 64, "the packed counts must fit 64 bits");

/// The tiles of `items` items.
GRADGATE_HOST_DEVICE constexpr uint64_t tile_count(uint64_t items) {
  return (items + kTile - 1) / kTile;
}

/// Where a thread's item `slot` (row * kLanes + lane) sits in its tile.
GRADGATE_HOST_DEVICE constexpr uint32_t item_offset(uint32_t thread, int slot) {
  return kLanes * (thread + kThreads * static_cast<uint32_t>(slot / kLanes)) + slot % kLanes;
}

/// The packed per-row counts of a thread's flags (bit `slot` set: item `slot` is flagged).
GRADGATE_HOST_DEVICE constexpr uint64_t row_counts(uint32_t flags) {
  uint64_t packed = 0;
  for (int slot = 0; slot < kItems; ++slot) {
    packed += static_cast<uint64_t>((flags >> slot) & 1u) << (kRowBits * (slot / kLanes));
  }
  return packed;
}

/// The count of `row` in a packed word.
GRADGATE_HOST_DEVICE constexpr uint32_t row_field(uint64_t packed, int row) {
  return static_cast<uint32_t>(packed >> (kRowBits * row)) & ((1u << kRowBits) - 1);
}

/// All the counts of a packed word: for a block's aggregate, the tile's flagged items.
GRADGATE_HOST_DEVICE constexpr uint32_t total(uint64_t packed) {
  uint32_t sum = 0;
  for (int row = 0; row < kRows; ++row) sum += row_field(packed, row);
  return sum;
}

/// The rank within its tile of a thread's flagged item `slot`, given the thread's `flags`,
/// `prefix`, the exclusive sum of the packed counts of the threads before it, and `aggregate`, the
/// block's sum: the flagged items of the earlier rows, then those of the earlier threads in its
/// row, then this thread's flagged items before it in the row.
GRADGATE_HOST_DEVICE constexpr uint32_t rank(uint64_t prefix, uint64_t aggregate, uint32_t flags,
                                             int slot) {
  const int row = slot / kLanes;
  uint32_t rank = row_field(prefix, row);
  for (int earlier = 0; earlier < row; ++earlier) rank += row_field(aggregate, earlier);
  for (int lane = 0; lane < slot % kLanes; ++lane) rank += (flags >> (row * kLanes + lane)) & 1u;
  return rank;
}

}  // namespace gradgate::kernels::cuda::tile_order
