// The reference of the all-reduce benchmark: a plain ring all-reduce of fp32 (reduce-scatter,
// then all-gather) over loopback TCP between threads of this process, with blocking sockets and
// no framing, codec, checksum or shared memory: what a straightforward TCP implementation moves.
// Measured in the same run as the gateways, it is the yardstick their times are reported against.
#pragma once

#include <cstdint>
#include <vector>

namespace gradgate::bench {

class TcpRingReference {
 public:
  /// Connects `ranks` ring neighbours over 127.0.0.1 (ports from 0). Throws std::runtime_error.
  explicit TcpRingReference(uint32_t ranks);
  ~TcpRingReference();
  TcpRingReference(const TcpRingReference&) = delete;
  TcpRingReference& operator=(const TcpRingReference&) = delete;

  /// Sums data[0..ranks) element-wise into every one of them (all the same size); returns the
  /// wall time in seconds.
  double allreduce(std::vector<std::vector<float>>& data);

 private:
  void run_rank(uint32_t rank, std::vector<float>& data);

  uint32_t ranks_;
  std::vector<int> to_right_;                 // rank r sends to r + 1
  std::vector<int> from_left_;                // rank r receives from r - 1
  std::vector<std::vector<float>> incoming_;  // per rank: a piece of the chunk it is summing
};

}  // namespace gradgate::bench
