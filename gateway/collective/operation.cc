#include "gateway/collective/operation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
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
  report_.stamp = op.stamp;
  step_.step = op.seq;
  step_.policy_version = op.stamp.version;
  step_.worker = options.rank;
  step_.job_seed = options.job_id;
  step_.memory = op.memory;
  if (op.queue != nullptr) step_.cuda_stream = op.queue->cuda_stream();
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
  const Message scales = std::make_shared<const MessageBytes>(
      make_message({MessageKind::kScale, 0, op_.tensor_id, 0, op_.seq, report_.stamp, on_device()},
                   std::as_bytes(std::span(local))));
  for (uint32_t peer = 0; peer < nodes(); ++peer) {
    if (peer != rank()) GRADGATE_RETURN_IF_ERROR(send(peer, scales));
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

kernels::StepContext Operation::step_of(size_t chunk) const {
  kernels::StepContext step = step_;
  if (!agreed_scales_.empty()) step.agreed_scale = agreed_scales_[chunk];
  return step;
}

Result<Mail> Operation::make_frame(
    const kernels::Stream& stream,
    const std::function<Result<size_t>(std::span<std::byte>)>& write) {
  const size_t max_bytes = codec().max_frame_bytes(stream.desc());
  Mail mail{MessageBytes(kEnvelopeBytes + max_bytes)};
  const std::span<std::byte> out = std::span(mail.bytes).subspan(kEnvelopeBytes);
  auto size = on_device() ? op_.staging->encode_to_host(max_bytes, write, out) : write(out);
  if (!size.ok()) return size.status();
  mail.bytes.resize(kEnvelopeBytes + *size);
  return mail;
}

Result<kernels::FrameView> Operation::codec_view(const kernels::FrameView& view,
                                                 std::span<const std::byte> frame) {
  if (!on_device()) return view;
  auto on_gpu = op_.staging->to_device(frame);
  if (!on_gpu.ok()) return on_gpu.status();
  return kernels::FrameView{view.header, on_gpu->subspan(kernels::kFrameHeaderBytes)};
}

Result<Mail> Operation::encode(int round, size_t chunk) {
  Stopwatch watch(report_.encode_seconds);
  kernels::Stream& stream = *streams().streams[chunk];
  return make_frame(stream, [&](std::span<std::byte> out) {
    return codec().encode(round, step_of(chunk), chunk_data(chunk), stream, out);
  });
}

Result<Mail> Operation::encode_owned_sum(size_t chunk, std::span<const float> sum) {
  Stopwatch watch(report_.encode_seconds);
  kernels::StepContext step = step_of(chunk);
  step.agreed_scale = 0.0f;  // the codec takes the sum's own scale
  kernels::Stream& stream = *streams().owner_stream;
  return make_frame(
      stream, [&](std::span<std::byte> out) { return codec().encode(0, step, sum, stream, out); });
}

Result<Mail> Operation::encode_add(int round, size_t chunk, std::span<const std::byte> other) {
  if (on_device()) {  // `other` is in host memory: the own frame joins it there
    // Checked first: a frame that does not belong here must leave the residual untouched.
    if (auto view = parse(other, chunk); !view.ok()) return view.status();
    auto own = encode(round, chunk);
    if (!own.ok()) return own.status();
    return add(own->payload(), other, chunk);
  }
  auto view = parse(other, chunk);
  if (!view.ok()) return view.status();
  Stopwatch watch(report_.encode_seconds);
  kernels::Stream& stream = *streams().streams[chunk];
  return make_frame(stream, [&](std::span<std::byte> out) {
    return codec().encode_add(round, step_of(chunk), chunk_data(chunk), stream, *view, out);
  });
}

Result<kernels::FrameView> Operation::parse(std::span<const std::byte> frame, size_t chunk) const {
  auto header = kernels::peek_frame_header(frame);
  if (!header.ok()) return header.status();
  if (frame.size() != kernels::kFrameHeaderBytes + header->payload_bytes) {
    return Status(ErrorCode::kMalformedFrame, "frame length does not match its header");
  }
  const kernels::FrameView view{*header, frame.subspan(kernels::kFrameHeaderBytes)};
  const kernels::TensorDesc& desc = streams().streams[chunk]->desc();
  if (view.header.policy_version != op_.stamp.version) {
    return Status(
        ErrorCode::kIncompatible,
        "frame of policy version " + std::to_string(view.header.policy_version) +
            " in a step this gateway runs under policy version " +
            std::to_string(op_.stamp.version) +
            " (the gateways switched policy at different steps; the one behind catches up "
            "with the newer version)");
  }
  if (view.header.codec != codec().id() || view.header.tensor_id != desc.tensor_id ||
      view.header.step != op_.seq || view.header.element_count != desc.elements) {
    return Status(ErrorCode::kIncompatible,
                  "frame of codec " + std::string(codec_name(view.header.codec)) + ", tensor " +
                      std::to_string(view.header.tensor_id) + ", step " +
                      std::to_string(view.header.step) + ", " +
                      std::to_string(view.header.element_count) +
                      " elements does not belong to this all-reduce (tensor " +
                      std::to_string(desc.tensor_id) + ", step " + std::to_string(op_.seq) + ", " +
                      std::to_string(desc.elements) + " elements, codec " + codec().spec() + ")");
  }
  return view;
}

Result<Mail> Operation::add(std::span<const std::byte> a, std::span<const std::byte> b,
                            size_t chunk) {
  Stopwatch watch(report_.decode_seconds);
  auto view_a = parse(a, chunk);
  if (!view_a.ok()) return view_a.status();
  auto view_b = parse(b, chunk);
  if (!view_b.ok()) return view_b.status();
  Mail sum{MessageBytes(kEnvelopeBytes + std::max(a.size(), b.size()))};
  auto size =
      frame_codec().add_frames(*view_a, *view_b, std::span(sum.bytes).subspan(kEnvelopeBytes));
  if (!size.ok()) return size.status();
  sum.bytes.resize(kEnvelopeBytes + *size);
  return sum;
}

Status Operation::decode_into(std::span<const std::byte> frame, size_t chunk,
                              std::span<float> acc) {
  Stopwatch watch(report_.decode_seconds);
  auto view = parse(frame, chunk);
  if (!view.ok()) return view.status();
  auto decoded = codec_view(*view, frame);
  if (!decoded.ok()) return decoded.status();
  return codec().decode_accumulate(*decoded, streams().streams[chunk].get(), acc);
}

Status Operation::decode_chunk(std::span<const std::byte> frame, size_t chunk) {
  Stopwatch watch(report_.decode_seconds);
  auto view = parse(frame, chunk);
  if (!view.ok()) return view.status();
  auto decoded = codec_view(*view, frame);
  if (!decoded.ok()) return decoded.status();
  return codec().decode(*decoded, streams().streams[chunk].get(), chunk_data(chunk));
}

Status Operation::absorb(int round, std::span<const std::byte> frame, size_t chunk) {
  Stopwatch watch(report_.decode_seconds);
  auto view = parse(frame, chunk);
  if (!view.ok()) return view.status();
  auto absorbed = codec_view(*view, frame);
  if (!absorbed.ok()) return absorbed.status();
  return codec().absorb(round, *absorbed, *streams().streams[chunk]);
}

Message Operation::stamp(Mail&& mail, MessageKind kind, uint32_t phase, size_t chunk) const {
  write_envelope({kind, static_cast<uint16_t>(chunk), op_.tensor_id, phase, op_.seq, report_.stamp,
                  on_device()},
                 mail.bytes);
  return std::make_shared<const MessageBytes>(std::move(mail.bytes));
}

Status Operation::send(uint32_t to, const Message& message) {
  GRADGATE_RETURN_IF_ERROR(
      mailbox_.wait_to_send(to, op_.tensor_id, op_.seq, down_counts_[to], deadline_));
  Status sent = transport_.send(to, message);
  if (!sent.ok()) {
    const auto kind = parse_envelope(*message);
    return Status(sent.code(),
                  "sending the " +
                      std::string(kind.ok() ? message_kind_name(kind->kind) : "unknown") +
                      " message to gateway " + std::to_string(to) + ": " + sent.message());
  }
  report_.wire_bytes += message->size();
  return {};
}

Result<Mail> Operation::receive(uint32_t from, MessageKind kind, uint32_t phase, size_t chunk) {
  const MailKey key{op_.tensor_id, op_.seq, kind, phase, static_cast<uint16_t>(chunk), from};
  auto mail = mailbox_.take(key, deadline_, down_counts_[from], op_.stamp);
  if (mail.ok()) report_.stamp = report_.stamp.heard(mail->envelope.stamp);
  return mail;
}

Result<Mail> Operation::receive_frame(uint32_t from, MessageKind kind, uint32_t phase,
                                      size_t chunk) {
  auto mail = receive(from, kind, phase, chunk);
  if (!mail.ok()) return mail;
  Stopwatch watch(report_.decode_seconds);
  auto verified = kernels::parse_frame(mail->payload());
  if (!verified.ok()) {
    return Status(verified.status().code(), "frame from gateway " + std::to_string(from) + ": " +
                                                verified.status().message());
  }
  // Gateways may place a codec whose frames decode alike on either side; for the others (powersgd,
  // whose GEMMs round differently) every gateway must decode on the same side.
  if (!codec_traits(codec().id()).decodes_alike_on_gpu_and_cpu) {
    const bool sender_on_gpu = mail->envelope.sender_decodes_on_gpu;
    if (sender_on_gpu != on_device()) {
      const auto side = [](bool gpu) { return gpu ? "the GPU" : "the CPU"; };
      return Status(ErrorCode::kIncompatible,
                    "gateway " + std::to_string(from) + " decodes " + codec().spec() + " on " +
                        side(sender_on_gpu) + ", this gateway on " + side(on_device()) +
                        ": their results would differ in rounding; give every gateway the same "
                        "compression.placement and its workers the same kind of buffers (GPU or "
                        "host memory)");
    }
  }
  return mail;
}

Message Operation::abort_message(const Status& why) const {
  const std::string reason = why.to_string();
  const auto payload = std::as_bytes(std::span<const char>(reason.data(), reason.size()));
  const Envelope envelope{.kind = MessageKind::kAbort,
                          .tensor_id = op_.tensor_id,
                          .phase = static_cast<uint32_t>(why.code()),
                          .seq = op_.seq,
                          .stamp = SwitchStamp::of_abort(
                              op_.stamp.version, mailbox_.newest_peer_policy(op_.tensor_id))};
  return std::make_shared<const MessageBytes>(make_message(envelope, payload));
}

}  // namespace gradgate::gateway
