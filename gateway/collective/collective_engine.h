// Runs the all-reduce of one tensor's node sum across the job's gateways, over compressed frames.
//
// Every gateway of the job calls allreduce() for the same (tensor, seq) with its node's sum; each
// returns the same bits: the codec's decoding of the aggregate, the same frames decoded in the
// same order everywhere. The call blocks its thread until done; it never waits past the
// configured timeout, and ends early when a peer disconnects or aborts. On a local error it tells
// the other gateways (an abort message), so their workers get the error at once instead of at
// the timeout; a peer that is not connected then is told when it is back (recent_aborts.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "gateway/collective/frame_staging.h"
#include "gateway/collective/mailbox.h"
#include "gateway/collective/recent_aborts.h"
#include "gateway/collective/tensor_streams.h"
#include "gateway/transport/transport.h"
#include "gradgate/base/log_throttle.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/device_ops.h"

namespace gradgate::gateway {

struct CollectiveOptions {
  uint32_t rank = 0;
  uint32_t nodes = 1;
  uint64_t job_id = 0;
  std::chrono::milliseconds timeout{30000};
};

/// One all-reduce: `data` holds the node's sum on entry and the job's aggregate on return.
struct AllreduceOp {
  uint32_t tensor_id = 0;
  uint64_t seq = 0;
  SwitchStamp stamp{};  // the agreement's, as the operation starts (switch_stamp.h)
  std::span<float> data;
  const kernels::Codec* codec = nullptr;
  TensorStreams* streams = nullptr;
  /// Where `data` lives. kDevice: in GPU memory of `queue`'s GPU, with `codec` a CUDA codec and
  /// `streams` its streams; frames are encoded and decoded there and staged through host memory
  /// for the transport, and summed on the host by `host_codec`, the same codec on the CPU (the
  /// frames are the same bytes).
  kernels::MemoryKind memory = kernels::MemoryKind::kHost;
  kernels::DeviceQueue* queue = nullptr;
  const kernels::Codec* host_codec = nullptr;
  FrameStaging* staging = nullptr;  // how its frames cross between the GPU and the host
};

struct AllreduceReport {
  uint64_t wire_bytes = 0;  // bytes this gateway sent (envelopes and frames)
  double encode_seconds = 0.0;
  double communicate_seconds = 0.0;
  double decode_seconds = 0.0;
  /// Aggregator mode: nonzero elements of the sums this gateway aggregated (the union of the
  /// workers' selected indices for sparse codecs); 0 otherwise.
  uint64_t union_elements = 0;
  /// The operation's stamp after hearing every message this gateway took (directly or through
  /// what they carried): once the operation succeeded, the same on every gateway of the job.
  SwitchStamp stamp{};
};

class CollectiveEngine {
 public:
  CollectiveEngine(CollectiveOptions options, Transport& transport, Mailbox& mailbox);

  /// Thread-safe for different tensors; one operation per tensor at a time.
  Result<AllreduceReport> allreduce(const AllreduceOp& op);
  /// For a step this gateway cannot run at all: tells the other gateways (an abort message), so
  /// that their workers get `why` at once instead of at the timeout.
  void abort(const AllreduceOp& op, const Status& why);
  /// abort() for a step after one that still runs: what the peers sent for it stays filed (the
  /// mailbox drops it as it expires or when a later step ends), since dropping a step's mail
  /// drops that of every earlier step too.
  void tell_abort(const AllreduceOp& op, const Status& why);

  /// What the transport calls, to start it with: receiving mirrors sending, both the
  /// collective's. Messages go to the mailbox (a refused one is logged, throttled per peer, and
  /// resets the link unless only the mailbox's cap refused it); peers going up or down go to
  /// peer_changed().
  Transport::Handlers transport_handlers();
  /// The mailbox learns that `rank` went up or down, and a peer that is back is sent the recent
  /// aborts again (some may not have reached it).
  void peer_changed(uint32_t rank, bool up);

 private:
  /// Sends an abort message to every peer connected now, and keeps it to send again to each peer
  /// whose link comes up in the next collective timeout.
  void broadcast_abort(const Message& abort);

  CollectiveOptions options_;
  Transport& transport_;
  Mailbox& mailbox_;
  RecentAborts recent_aborts_;
  LogThrottle refused_log_;  // used on the transport's thread only
};

}  // namespace gradgate::gateway
