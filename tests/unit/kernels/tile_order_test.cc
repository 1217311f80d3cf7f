// The tile layout and ranks of topk's ordered compactions (kernels/cuda/tile_order.h), run on the
// CPU: the slots cover a tile once, and the ranks that one exclusive scan of the packed row counts
// gives are the flagged items' order by index, whatever the flags.
#include "tile_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace gradgate::kernels::cuda::tile_order {
namespace {

// Every thread's flags, drawn with probability `density` per item.
std::vector<uint32_t> random_flags(double density, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution flagged(density);
  std::vector<uint32_t> flags(kThreads, 0);
  for (auto& f : flags) {
    for (int slot = 0; slot < kItems; ++slot) f |= static_cast<uint32_t>(flagged(rng)) << slot;
  }
  return flags;
}

// The block's sum of the threads' packed counts.
uint64_t aggregate_of(const std::vector<uint32_t>& flags) {
  uint64_t aggregate = 0;
  for (uint32_t f : flags) aggregate += row_counts(f);
  return aggregate;
}

// The tile offset of each flagged item, placed at the rank the kernels give it (one slot per
// flagged item the packed counts hold): one exclusive scan of the threads' packed counts, as the
// block scan computes it.
std::vector<int64_t> placed_offsets(const std::vector<uint32_t>& flags) {
  const uint64_t aggregate = aggregate_of(flags);
  const uint32_t tile_total = total(aggregate);
  std::vector<int64_t> placed(tile_total, -1);
  uint64_t prefix = 0;
  for (uint32_t thread = 0; thread < kThreads; ++thread) {
    for (int slot = 0; slot < kItems; ++slot) {
      if (!((flags[thread] >> slot) & 1u)) continue;
      const uint32_t at = rank(prefix, aggregate, flags[thread], slot);
      EXPECT_LT(at, tile_total) << "thread " << thread << " slot " << slot;
      if (at >= tile_total) continue;
      EXPECT_EQ(placed[at], -1) << "rank " << at << " given twice";
      placed[at] = item_offset(thread, slot);
    }
    prefix += row_counts(flags[thread]);
  }
  return placed;
}

TEST(TileOrder, SlotsCoverTheTileOnceAndARowIsFourConsecutiveItems) {
  std::vector<int> hits(kTile, 0);
  for (uint32_t thread = 0; thread < kThreads; ++thread) {
    for (int slot = 0; slot < kItems; ++slot) {
      const uint32_t offset = item_offset(thread, slot);
      ASSERT_LT(offset, kTile);
      ++hits[offset];
      if (slot % kLanes != 0) {
        EXPECT_EQ(offset, item_offset(thread, slot - 1) + 1);
      }
    }
  }
  EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
  EXPECT_EQ(item_offset(1, 0), 4u);                 // a row is one float4 per thread
  EXPECT_EQ(item_offset(0, kLanes), 4 * kThreads);  // the next row follows the block's first
}

TEST(TileOrder, RanksPlaceTheFlaggedItemsInIndexOrder) {
  for (double density : {0.0, 0.001, 0.015, 0.3, 0.9, 1.0}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      SCOPED_TRACE(testing::Message() << "density " << density << " seed " << seed);
      const auto flags = random_flags(density, seed);
      std::vector<int64_t> expected;
      for (uint32_t thread = 0; thread < kThreads; ++thread) {
        for (int slot = 0; slot < kItems; ++slot) {
          if ((flags[thread] >> slot) & 1u) expected.push_back(item_offset(thread, slot));
        }
      }
      std::sort(expected.begin(), expected.end());
      const auto placed = placed_offsets(flags);
      EXPECT_EQ(placed.size(), expected.size());
      EXPECT_EQ(placed, expected);
    }
  }
}

TEST(TileOrder, AFullyFlaggedTileFitsThePackedCounts) {
  const std::vector<uint32_t> all(kThreads, (1u << kItems) - 1);
  const uint64_t aggregate = aggregate_of(all);
  for (int row = 0; row < kRows; ++row) EXPECT_EQ(row_field(aggregate, row), kThreads * kLanes);
  EXPECT_EQ(total(aggregate), kTile);
  EXPECT_EQ(rank(aggregate - row_counts(all.back()), aggregate, all.back(), kItems - 1), kTile - 1);
}

TEST(TileOrder, TileCountRoundsUp) {
  EXPECT_EQ(tile_count(0), 0u);
  EXPECT_EQ(tile_count(1), 1u);
  EXPECT_EQ(tile_count(kTile), 1u);
  EXPECT_EQ(tile_count(kTile + 1), 2u);
  EXPECT_EQ(tile_count(uint64_t{1} << 28), (uint64_t{1} << 28) / kTile);
}

}  // namespace
}  // namespace gradgate::kernels::cuda::tile_order
