// Where the codec of a tensor in GPU memory runs: what the configuration's compression.placement
// names and the gateway's placement decides by.
#pragma once

namespace gradgate {

enum class PlacementMode {
  kAuto,  // where a probe of the codec measures it faster (GPU when the CPU is not faster)
  kGpu,   // on the GPU whenever it can
  kCpu,   // on the CPU: the node sum is staged through host memory
};

}  // namespace gradgate
