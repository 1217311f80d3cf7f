#include "gateway/collective/operation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "gateway/collective/stopwatch.h"

namespace gradgate::gateway {

Operation::Operation(const CollectiveOptions& options, Transport& transport, Mailbox& mailbox,
                     const AllreduceOp& op)
    : options_(options),
      transport_(transport),
      mailbox_(mailbox),
      op_(op),
      deadline_(Clock::now() + options.timeout),
      down_counts_(options.nodes) {
  step_.step = op.seq;
  step_.policy_version = op.policy_version;
  step_.worker = options.rank;
  step_.job_seed = options.job_id;
  for (uint32_t rank = 0; rank < options.nodes; ++rank) {
    down_counts_[rank] = mailbox.down_count(rank);
  }
}

std::span<float> Operation::chunk_data(size_t chunk) const {
  const Chunk& part = streams().chunks[chunk];
  return op_.data.subspan(part.offset, part.elements);
}

Status Operation::agree_scales() {
  const size_t chunks = streams().chunks.size();
  std::vector<float> local(chunks);
  {
    Stopwatch watch(report_.encode_seconds);
    for (size_t c = 0; c < chunks; ++c) {
      local[c] = codec().local_scale(chunk_data(c), *streams().streams[c]);
    }
  }
  const auto payload = std::as_bytes(std::span<const float>(local));
  for (uint32_t peer = 0; peer < nodes(); ++peer) {
    if (peer != rank()) GRADGATE_RETURN_IF_ERROR(send(peer, MessageKind::kScale, 0, 0, payload));
  }
  agreed_scales_ = local;
  for (uint32_t peer = 0; peer < nodes(); ++peer) {
    if (peer == rank()) continue;
    auto mail = receive(peer, MessageKind::kScale, 0, 0);
    if (!mail.ok()) return mail.status();
    if (mail->payload().size() != chunks * sizeof(float)) {
      return Status(ErrorCode::kMalformedFrame,
                    "scale message from gateway " + std::to_string(peer) + " has " +
                        std::to_string(mail->payload().size()) + " bytes, expected " +
                        std::to_string(chunks * sizeof(float)));
    }
    for (size_t c = 0; c < chunks; ++c) {
      float scale;
      std::memcpy(&scale, mail->payload().data() + c * sizeof(float), sizeof(float));
      if (!std::isfinite(scale)) {
        return Status(ErrorCode::kInvalidArgument,
                      "gateway " + std::to_string(peer) + " sent a non-finite scale");
      }
      agreed_scales_[c] = std::max(agreed_scales_[c], scale);
    }
  }
  return {};
}

Result<std::vector<std::byte>> Operation::encode(int round, size_t chunk, kernels::Stream& stream,
                                                 std::span<const float> values) {
  Stopwatch watch(report_.encode_seconds);
  kernels::StepContext step = step_;
  if (!agreed_scales_.empty()) step.agreed_scale = agreed_scales_[chunk];
  std::vector<std::byte> frame(codec().max_frame_bytes(stream.desc()));
  auto size = codec().encode(round, step, values, stream, frame);
  if (!size.ok()) return size.status();
  frame.resize(*size);
  return frame;
}

Result<kernels::FrameView> Operation::parse(std::span<const std::byte> frame, size_t chunk) const {
  auto view = kernels::parse_frame(frame);
  if (!view.ok()) return view.status();
  const kernels::TensorDesc& desc = streams().streams[chunk]->desc();
  if (view->header.codec != codec().id() || view->header.tensor_id != desc.tensor_id ||
      view->header.step != op_.seq || view->header.element_count != desc.elements) {
    return Status(ErrorCode::kIncompatible,
                  "frame of codec " + std::string(kernels::codec_name(view->header.codec)) +
                      ", tensor " + std::to_string(view->header.tensor_id) + ", step " +
                      std::to_string(view->header.step) + ", " +
                      std::to_string(view->header.element_count) +
                      " elements does not belong to this all-reduce (tensor " +
                      std::to_string(desc.tensor_id) + ", step " + std::to_string(op_.seq) + ", " +
                      std::to_string(desc.elements) + " elements, codec " + codec().spec() + ")");
  }
  return view;
}

Result<std::vector<std::byte>> Operation::add(std::span<const std::byte> a,
                                              std::span<const std::byte> b, size_t chunk) {
  Stopwatch watch(report_.decode_seconds);
  auto view_a = parse(a, chunk);
  if (!view_a.ok()) return view_a.status();
  auto view_b = parse(b, chunk);
  if (!view_b.ok()) return view_b.status();
  std::vector<std::byte> sum(std::max(a.size(), b.size()));
  auto size = codec().add_frames(*view_a, *view_b, sum);
  if (!size.ok()) return size.status();
  sum.resize(*size);
  return sum;
}

Status Operation::decode_into(std::span<const std::byte> frame, size_t chunk,
                              std::span<float> acc) {
  Stopwatch watch(report_.decode_seconds);
  auto view = parse(frame, chunk);
  if (!view.ok()) return view.status();
  return codec().decode_accumulate(*view, streams().streams[chunk].get(), acc);
}

Status Operation::send(uint32_t to, MessageKind kind, uint32_t phase, size_t chunk,
                       std::span<const std::byte> payload) {
  GRADGATE_RETURN_IF_ERROR(mailbox_.wait_peer_up(to, deadline_));
  const Envelope envelope{kind, static_cast<uint16_t>(chunk), op_.tensor_id, phase, op_.seq};
  auto message = std::make_shared<const std::vector<std::byte>>(make_message(envelope, payload));
  const size_t bytes = message->size();
  Status sent = transport_.send(to, std::move(message));
  if (!sent.ok()) {
    return Status(sent.code(), "sending the " + std::string(message_kind_name(kind)) +
                                   " message to gateway " + std::to_string(to) + ": " +
                                   sent.message());
  }
  report_.wire_bytes += bytes;
  return {};
}

Result<Mail> Operation::receive(uint32_t from, MessageKind kind, uint32_t phase, size_t chunk) {
  const MailKey key{op_.tensor_id, op_.seq, kind, phase, static_cast<uint16_t>(chunk), from};
  return mailbox_.take(key, deadline_, down_counts_[from]);
}

void Operation::broadcast_abort(const Status& why) {
  const std::string reason = why.to_string();
  const auto payload = std::as_bytes(std::span<const char>(reason.data(), reason.size()));
  const Envelope envelope{MessageKind::kAbort, 0, op_.tensor_id, 0, op_.seq};
  auto message = std::make_shared<const std::vector<std::byte>>(make_message(envelope, payload));
  for (uint32_t peer = 0; peer < nodes(); ++peer) {
    if (peer != rank() && mailbox_.peer_up(peer)) (void)transport_.send(peer, message);
  }
}

}  // namespace gradgate::gateway
