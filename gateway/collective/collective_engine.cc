#include "gateway/collective/collective_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <string>

#include "gateway/collective/operation.h"
#include "gateway/collective/stopwatch.h"

namespace gradgate::gateway {

CollectiveEngine::CollectiveEngine(CollectiveOptions options, Transport& transport,
                                   Mailbox& mailbox)
    : options_(options),
      transport_(transport),
      mailbox_(mailbox),
      recent_aborts_(options.nodes, options.timeout) {}

Result<AllreduceReport> CollectiveEngine::allreduce(const AllreduceOp& op) {
  if (op.codec == nullptr || op.streams == nullptr) {
    return Status(ErrorCode::kInternal, "all-reduce without a codec or streams");
  }
  if (op.memory == kernels::MemoryKind::kDevice) {
    if (op.queue == nullptr || op.host_codec == nullptr || op.staging == nullptr) {
      return Status(ErrorCode::kInternal,
                    "all-reduce in GPU memory without a queue, host codec or frame staging");
    }
    if (op.streams->algorithm == Algorithm::kAggregator) {
      return Status(ErrorCode::kUnsupported, "the aggregator collective runs on the CPU only");
    }
    GRADGATE_RETURN_IF_ERROR(op.queue->make_current());  // the CUDA codec's calls run there
  }
  Operation operation(options_, transport_, mailbox_, op);
  double total_seconds = 0.0;
  Status status;
  {
    Stopwatch watch(total_seconds);
    try {
      switch (op.streams->algorithm) {
        case Algorithm::kLocal:
          break;
        case Algorithm::kRing:
          status = run_ring(operation);
          break;
        case Algorithm::kAllGather:
          status = run_all_gather(operation);
          break;
        case Algorithm::kAggregator:
          status = run_aggregator(operation);
          break;
      }
    } catch (const std::exception& error) {  // bad_alloc of a frame or a sum: the failure path
      status = Status(ErrorCode::kResourceExhausted, std::string("all-reduce: ") + error.what());
    }
  }
  if (!status.ok()) {
    const std::optional<Status> peer = mailbox_.peer_abort(op.tensor_id, op.seq);
    // A failure elsewhere wins over a skip here, so that the job's workers all fail the step.
    if (peer && status.code() == ErrorCode::kNonFiniteGradient &&
        peer->code() != ErrorCode::kNonFiniteGradient) {
      status = *peer;
    }
    // A peer's abort of the same kind has reached the others already (its sender tells every
    // gateway); one of another kind has not told them ours.
    if (status.code() != ErrorCode::kAborted && !(peer && peer->code() == status.code())) {
      broadcast_abort(operation.abort_message(status));
    }
    mailbox_.finish(op.tensor_id, op.seq);
    return Status(status.code(), std::string(algorithm_name(op.streams->algorithm)) +
                                     " all-reduce of tensor " + std::to_string(op.tensor_id) +
                                     " step " + std::to_string(op.seq) + " on gateway " +
                                     std::to_string(options_.rank) + ": " + status.message());
  }
  mailbox_.finish(op.tensor_id, op.seq);
  AllreduceReport report = operation.report();
  report.communicate_seconds =
      std::max(0.0, total_seconds - report.encode_seconds - report.decode_seconds);
  return report;
}

void CollectiveEngine::abort(const AllreduceOp& op, const Status& why) {
  tell_abort(op, why);
  mailbox_.finish(op.tensor_id, op.seq);
}

void CollectiveEngine::tell_abort(const AllreduceOp& op, const Status& why) {
  broadcast_abort(Operation(options_, transport_, mailbox_, op).abort_message(why));
}

Transport::Handlers CollectiveEngine::transport_handlers() {
  Transport::Handlers handlers;
  handlers.on_message = [this](uint32_t from, MessageBytes&& message) {
    Status filed = mailbox_.deliver(from, std::move(message));
    if (filed.ok()) return true;
    if (auto suppressed = refused_log_.admit(from)) {
      spdlog::warn("message from gateway {} refused: {} ({} more refused since the last line)",
                   from, filed.to_string(), *suppressed);
    }
    // Over the mailbox's cap, only the message's operation fails; anything else resets the link.
    return filed.code() == ErrorCode::kResourceExhausted;
  };
  handlers.on_peer = [this](uint32_t rank, bool up) {
    peer_changed(rank, up);
    spdlog::info("gateway {} {}", rank, up ? "connected" : "disconnected");
  };
  return handlers;
}

void CollectiveEngine::peer_changed(uint32_t rank, bool up) {
  mailbox_.peer_changed();
  if (!up) return;
  for (const Message& abort : recent_aborts_.kept(rank)) (void)transport_.send(rank, abort);
}

void CollectiveEngine::broadcast_abort(const Message& abort) {
  for (uint32_t peer = 0; peer < options_.nodes; ++peer) {
    if (peer == options_.rank) continue;
    // Kept before it is sent: a link that comes up meanwhile gets it from peer_changed, if this
    // send finds it still down.
    recent_aborts_.keep(peer, abort);
    (void)transport_.send(peer, abort);
  }
}

}  // namespace gradgate::gateway
