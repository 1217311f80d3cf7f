// Host-side entry points of the topk kernels: the pass that adds the gradient into the residual
// and collects the candidates tile by tile, the radix select among them (topk_plan.h) and keep,
// which puts the kept candidates in index order, and the payload's indices written and read on
// the device. Each enqueues its
// kernels on `stream` and returns the launch's Status. Host-only: compiles without nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gradgate/kernels/codec_spec.h"
#include "launch.h"
#include "topk_plan.h"

namespace gradgate::kernels::cuda {

/// A list of (index, value) pairs being appended to: room for `capacity`.
struct PairList {
  uint32_t* index;
  float* value;
  uint64_t capacity;
};

/// Elements to select from: `count` pairs, or with index == nullptr the dense array `value`
/// (element i at index i).
struct PairSource {
  const uint32_t* index;
  const float* value;
  uint64_t count;
};

/// Where the ordered compaction of the whole-array keep keeps the look-back state of its tiles
/// (tile_order::tile_count of its items): ordered_tiles_bytes(max_tiles) of device memory. Each
/// compaction resets what it uses, so compactions on one stream share it; compactions on two
/// streams at once must not.
struct OrderedTiles {
  void* memory;
  uint64_t max_tiles;
};

/// The device memory of an OrderedTiles of `max_tiles` tiles.
Result<size_t> ordered_tiles_bytes(uint64_t max_tiles);

/// How the first pass laid out its list: tile j of the elements (tile_order::kTile of them from
/// j * kTile) listed count[j] pairs, in index order, from position first[j] on. Tiles take their
/// places in the order they finish, so the list is in index order within each tile only; keep
/// (launch_topk_keep_listed) puts the pairs it keeps in index order. `kept` and `temp`
/// (listed_tiles_temp_bytes) are keep's scratch. Each array has room for max_tiles.
struct ListedTiles {
  uint32_t* first;
  uint32_t* count;
  uint32_t* kept;
  void* temp;
  size_t temp_bytes;
  uint64_t max_tiles;
};

/// The scratch that keep's scan of a ListedTiles of `max_tiles` tiles needs.
Result<size_t> listed_tiles_temp_bytes(uint64_t max_tiles);

/// The first pass of an encode (with `e`) or a read-only rescan (e == nullptr: v = g): with e,
/// v = e + g where that is finite, else v = e. Appends (i, v) of every finite |v| > t to `out`,
/// tile by tile (`listed` records where each tile's pairs went), for as many as fit. With e, the
/// new e is v, or 0 at the appended i when `clear_listed` (their v is in the list;
/// launch_topk_put of the list puts it back). Tallies the bad v in count[0], all the elements
/// above t in count[1] (those that did not fit too), the float bits of the largest kept |v| in
/// max[0] and the sum of the kept |v| in sum. `first_pass` says how full tiles of 16-byte aligned
/// arrays are loaded (TopkFirstPass, the spec's first_pass); the same results either way.
Status launch_topk_collect(const float* g, float* e, uint64_t n, float t, bool clear_listed,
                           const PairList& out, const ListedTiles& listed, TopkFirstPass first_pass,
                           Tally* tally, cudaStream_t stream);

/// bins (topk::kSelectBins, zeroed here) = the histogram of the order keys of `source` in `range`.
Status launch_topk_histogram(const PairSource& source, const topk::KeyRange& range, uint32_t* bins,
                             cudaStream_t stream);

/// Appends the pairs of `source` whose order key is >= `cut` to `out`, in the order of `source`,
/// counting them in count[2]; with `restore`, sets restore[i] = v for every other pair (i, v).
Status launch_topk_keep(const PairSource& source, uint64_t cut, const PairList& out,
                        const OrderedTiles& tiles, float* restore, Tally* tally,
                        cudaStream_t stream);

/// keep over the list of a first pass over n elements that fitted whole (`list`: its pairs,
/// `listed`: its tiles): the pairs whose order key is >= `cut` go to `out` in index order,
/// counted in count[2]; with `restore`, restore[i] = v for every other pair (i, v).
Status launch_topk_keep_listed(const PairSource& list, const ListedTiles& listed, uint64_t n,
                               uint64_t cut, const PairList& out, float* restore, Tally* tally,
                               cudaStream_t stream);

/// out[index] = value for each pair of `pairs` (index != nullptr).
Status launch_topk_put(const PairSource& pairs, float* out, cudaStream_t stream);

/// Device scratch that launch_topk_varint_offsets needs for `count` indices.
Result<size_t> topk_varint_temp_bytes(uint64_t count);

/// offsets[j] = where the LEB128 varint of gap j of the ascending `index` starts (gap j = index[j]
/// - index[j - 1] - 1, gap 0 = index[0]), offsets[count] = their total bytes; offsets has room
/// for count + 1.
Status launch_topk_varint_offsets(const uint32_t* index, uint64_t count, uint64_t* offsets,
                                  void* temp, size_t temp_bytes, cudaStream_t stream);

/// A topk payload to write: [u32 count][u32 index_bytes][indices][values].
struct TopkPayloadOut {
  std::byte* payload;  // 4-byte aligned
  uint32_t count;
  uint32_t index_bytes;
  bool bitmap;  // indices as a bitmap of index_bytes bytes, else varints at `offsets`
  bool fp16;    // values as IEEE half, else fp32
};

/// Writes the payload of the ascending `index` and their `value`, and sets e (if any) at those
/// indices to what the wire does not carry: 0, or the fp16 rounding error.
Status launch_topk_write(const uint32_t* index, const float* value, const uint64_t* offsets,
                         const TopkPayloadOut& out, float* e, cudaStream_t stream);

/// The index bytes of a received topk payload and where to decode them.
struct TopkIndexIn {
  const std::byte* bytes;
  uint64_t byte_count;
  bool bitmap;
  uint64_t count;     // the payload's count
  uint64_t elements;  // n
};

/// Device scratch that launch_topk_decode_indices needs.
Result<size_t> topk_decode_temp_bytes(const TopkIndexIn& in);

/// Decodes the indices into `index` (room for in.count) after checking them: tallies in word[0]
/// the indices the bytes hold, in count[1] those >= n, and in count[2] the malformed bytes (a
/// varint longer than 5 bytes or left open at the end; a bitmap bit past n). `temp` holds
/// topk_decode_temp_bytes.
Status launch_topk_decode_indices(const TopkIndexIn& in, uint32_t* index, void* temp,
                                  size_t temp_bytes, Tally* tally, cudaStream_t stream);

}  // namespace gradgate::kernels::cuda
