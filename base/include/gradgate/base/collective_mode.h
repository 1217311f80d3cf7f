// How a tensor's frames travel between the gateways of a job: what the configuration's
// compression.collective names and the collective chooses its algorithm by.
#pragma once

namespace gradgate {

enum class CollectiveMode {
  kAuto,        // ring for summable codecs, all-gather for the others
  kRing,        // ring reduce-scatter + all-gather (summable codecs only)
  kAllGather,   // every gateway gets every frame and sums them itself
  kAggregator,  // non-summable codecs at scale: shard owners sum, re-compress with their own
                // error feedback, and send the aggregate back (parameter-server style)
};

}  // namespace gradgate
