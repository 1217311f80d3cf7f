// The Unix-socket ingress server: one thread runs a poll loop over the listening socket, the
// sessions and the completion queue's eventfd. Packets are read one at a time per session and
// answered in order; completions from other threads reach their session through the queue.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include <spdlog/spdlog.h>

#include "gateway/ingress/completion_queue.h"
#include "gateway/ingress/cuda_buffers.h"
#include "gateway/ingress/ingress.h"
#include "gateway/ingress/mapped_buffer.h"
#include "gateway/ingress/session.h"
#include "gateway/ingress/status_mapping.h"
#include "gateway/ingress/unix_listener.h"
#include "gradgate/base/log_throttle.h"
#include "gradgate/ingress_protocol.h"
#include "gradgate/ingress_socket.h"
#include "gradgate/kernels/cuda_ipc.h"

namespace gradgate::gateway {
namespace {

namespace proto = gradgate::ingress_protocol;

// The bytes of `buffer` mapped from a worker's shared memory (the mapped_bytes gauge); a buffer in
// GPU memory counts in cuda_mappings instead.
size_t mapped_host_bytes(const WorkerBuffer& buffer) {
  return buffer.memory == kernels::MemoryKind::kHost ? buffer.bytes : 0;
}

/// At most this many connections are accepted per loop turn, so sessions are served meanwhile.
constexpr int kAcceptsPerTurn = 64;
/// How long accepting pauses when the process is out of file descriptors and has no spare one.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

/// A descriptor held in reserve for refusing connections when the process runs out of them.
int open_spare_descriptor() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

TensorSpec spec_of(const proto::Declare& declare) {
  TensorSpec spec;
  spec.name = declare.name;
  spec.elements = declare.elements;
  spec.dtype = static_cast<Dtype>(declare.dtype);
  spec.rows = declare.rows;
  spec.cols = declare.cols;
  spec.data_volume = declare.data_volume;
  return spec;
}

class UnixIngressServer final : public IngressServer {
 public:
  explicit UnixIngressServer(std::string path) : path_(std::move(path)) {}
  ~UnixIngressServer() override { stop(); }

  Status start(IngressHandler& handler) override;
  void stop() override;
  IngressStats stats() const override;

 private:
  void run();
  void accept_sessions();
  /// Out of file descriptors (accept failed with `error`): a connection would stay in the
  /// backlog and wake the loop at once, turn after turn. The spare descriptor makes room to accept
  /// it and close it (its worker's connect fails: the connection closed), counted and logged at
  /// most once a second. Whether one was; without a spare descriptor, accepting pauses for
  /// kAcceptPause instead.
  bool refuse_connection(int error);
  /// Reads and handles one packet; false when the session must close.
  bool serve(Session& session);
  bool handle(Session& session, proto::ReceivedPacket& packet);
  bool on_hello(Session& session, uint64_t request_id, const proto::ReceivedPacket& packet);
  bool on_declare(Session& session, uint64_t request_id, proto::ReceivedPacket& packet);
  bool on_declare_cuda(Session& session, uint64_t request_id, const proto::ReceivedPacket& packet);
  /// Hands a declared tensor's mapped buffer to the handler; answers DECLARE_OK or its refusal.
  bool declared(Session& session, uint64_t request_id, const proto::Declare& declare,
                WorkerBuffer buffer);
  bool on_allreduce(Session& session, uint64_t request_id, const proto::ReceivedPacket& packet);
  bool on_release(Session& session, uint64_t request_id, const proto::ReceivedPacket& packet);
  void deliver(Completion& completion);
  /// Sends a message; false (logged) when the session is unusable.
  template <typename Message>
  bool reply(Session& session, uint64_t request_id, const Message& message);
  /// Counts a well-formed declaration the gateway refuses (its memory cap, a conflicting spec,
  /// GPU memory it cannot map), logs it (once per local rank and 10 s at most) and tells the
  /// worker; the session goes on. Returns whether the reply was sent.
  bool refuse_declaration(Session& session, uint64_t request_id, const std::string& what,
                          gg_status status, const std::string& why);
  /// Counts a malformed message, tells the worker why, and returns false (close the session).
  bool protocol_error(Session& session, uint64_t request_id, const std::string& why);
  void close_session(uint64_t session_id);

  const std::string path_;
  IngressHandler* handler_ = nullptr;
  std::shared_ptr<CompletionQueue> queue_;
  int listen_fd_ = -1;
  int spare_fd_ = -1;
  std::chrono::steady_clock::time_point accept_paused_until_{};
  LogThrottle refused_log_;  // the server thread's only
  // Refused HELLOs by local rank: a restarted worker waiting for its rank tries every second.
  LogThrottle refused_worker_log_{std::chrono::seconds(10)};       // the server thread's only
  LogThrottle refused_declaration_log_{std::chrono::seconds(10)};  // by local rank; likewise
  std::thread thread_;
  std::mutex lifecycle_mu_;
  bool running_ = false;
  std::atomic<bool> stopping_{false};

  std::map<uint64_t, Session> sessions_;  // the server thread's only
  uint64_t next_session_id_ = 1;

  std::atomic<uint64_t> sessions_opened_{0};
  std::atomic<uint64_t> sessions_closed_{0};
  std::atomic<uint64_t> protocol_errors_{0};
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<uint64_t> descriptors_lost_{0};
  std::atomic<uint64_t> workers_refused_{0};
  std::atomic<uint64_t> declarations_refused_{0};
  std::atomic<uint64_t> mapped_bytes_{0};
  // Shared with the open allocations, which count themselves and may outlive the server.
  std::shared_ptr<std::atomic<uint64_t>> cuda_mappings_ =
      std::make_shared<std::atomic<uint64_t>>(0);
};

Status UnixIngressServer::start(IngressHandler& handler) {
  std::lock_guard lock(lifecycle_mu_);
  if (running_) {
    return Status(ErrorCode::kInvalidArgument, "ingress \"" + path_ + "\": already started");
  }
  auto queue = CompletionQueue::create();
  if (!queue.ok()) return queue.status();
  auto listener = listen_unix_seqpacket(path_);
  if (!listener.ok()) return listener.status();
  queue_ = std::move(queue).value();
  listen_fd_ = *listener;
  spare_fd_ = open_spare_descriptor();
  handler_ = &handler;
  stopping_ = false;
  try {
    thread_ = std::thread(&UnixIngressServer::run, this);
  } catch (const std::system_error& e) {
    if (spare_fd_ >= 0) close(spare_fd_);
    close(listen_fd_);
    unlink(path_.c_str());
    return Status(ErrorCode::kResourceExhausted,
                  "ingress \"" + path_ + "\": cannot start its thread: " + e.what());
  }
  running_ = true;
  return Status::ok_status();
}

void UnixIngressServer::stop() {
  std::lock_guard lock(lifecycle_mu_);
  if (!running_) return;
  stopping_ = true;
  queue_->wake();
  thread_.join();
  running_ = false;
}

IngressStats UnixIngressServer::stats() const {
  IngressStats s;
  s.sessions_opened = sessions_opened_.load();
  s.sessions_closed = sessions_closed_.load();
  s.protocol_errors = protocol_errors_.load();
  s.connections_refused = connections_refused_.load() + descriptors_lost_.load();
  s.workers_refused = workers_refused_.load();
  s.declarations_refused = declarations_refused_.load();
  s.mapped_bytes = mapped_bytes_.load();
  s.cuda_mappings = cuda_mappings_->load();
  return s;
}

void UnixIngressServer::run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;  // the session of fds[i + 2]
  while (!stopping_) {
    const auto pause = std::chrono::ceil<std::chrono::milliseconds>(
        accept_paused_until_ - std::chrono::steady_clock::now());
    const bool accepting = pause.count() <= 0;
    fds.assign({{queue_->event_fd(), POLLIN, 0},
                {listen_fd_, static_cast<short>(accepting ? POLLIN : 0), 0}});
    ids.clear();
    for (const auto& [id, session] : sessions_) {
      fds.push_back({session.fd, POLLIN, 0});
      ids.push_back(id);
    }
    if (poll(fds.data(), fds.size(), accepting ? -1 : static_cast<int>(pause.count())) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("ingress \"{}\": poll: {}", path_, std::strerror(errno));
      break;
    }
    if (fds[0].revents != 0) {
      for (Completion& completion : queue_->drain()) deliver(completion);
    }
    if (stopping_) break;
    if (fds[1].revents != 0) accept_sessions();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (fds[i + 2].revents == 0) continue;
      auto it = sessions_.find(ids[i]);
      if (it != sessions_.end() && !serve(it->second)) close_session(ids[i]);
    }
  }
  while (!sessions_.empty()) close_session(sessions_.begin()->first);
  close(listen_fd_);
  listen_fd_ = -1;
  if (spare_fd_ >= 0) close(spare_fd_);
  spare_fd_ = -1;
  unlink(path_.c_str());
}

void UnixIngressServer::accept_sessions() {
  for (int i = 0; i < kAcceptsPerTurn; ++i) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
      if (refuse_connection(errno)) continue;
      return;
    }
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        spdlog::warn("ingress \"{}\": accept: {}", path_, std::strerror(errno));
      }
      return;
    }
    const uint64_t id = next_session_id_++;
    Session& session = sessions_[id];
    session.id = id;
    session.fd = fd;
    sessions_opened_++;
  }
}

bool UnixIngressServer::refuse_connection(int error) {
  if (spare_fd_ < 0) spare_fd_ = open_spare_descriptor();
  if (spare_fd_ < 0) {
    accept_paused_until_ = std::chrono::steady_clock::now() + kAcceptPause;
    if (auto suppressed = refused_log_.admit(1)) {
      spdlog::error(
          "ingress \"{}\": out of file descriptors ({}): workers' connections wait ({} "
          "more lines since the last one); raise the gateway's open-file limit "
          "(ulimit -n)",
          path_, std::strerror(error), *suppressed);
    }
    return false;
  }
  close(spare_fd_);
  const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) {
    ++connections_refused_;  // counted before the worker can see its connection end
    close(fd);
  }
  spare_fd_ = open_spare_descriptor();
  if (fd < 0) return false;  // none waits any more
  if (auto suppressed = refused_log_.admit(0)) {
    spdlog::error(
        "ingress \"{}\": out of file descriptors ({}): a worker's connection was refused ({} more "
        "since the last line); raise the gateway's open-file limit (ulimit -n)",
        path_, std::strerror(error), *suppressed);
  }
  return true;
}

bool UnixIngressServer::serve(Session& session) {
  proto::ReceivedPacket packet;
  const ssize_t n = proto::receive_packet(session.fd, packet, MSG_DONTWAIT);
  if (n == -EAGAIN || n == -EWOULDBLOCK) return true;
  if (n == 0) return false;  // the worker closed the connection (or died)
  if (n < 0) {
    spdlog::warn("ingress session {} (rank {}): receive: {}", session.id, session.local_rank,
                 std::strerror(static_cast<int>(-n)));
    return false;
  }
  return handle(session, packet);
}

bool UnixIngressServer::handle(Session& session, proto::ReceivedPacket& packet) {
  if (packet.truncated) {
    return protocol_error(
        session, 0, "a message longer than " + std::to_string(proto::kMaxPacketBytes) + " bytes");
  }
  if (packet.descriptors_lost && packet.fds.size() >= proto::kMaxFdsPerPacket) {
    return protocol_error(
        session, 0,
        "a message with more than " + std::to_string(proto::kMaxFdsPerPacket) + " descriptors");
  }
  const auto header = proto::decode_header(packet.bytes);
  if (!header) {
    return protocol_error(session, 0,
                          "a message of " + std::to_string(packet.bytes.size()) +
                              " bytes without the protocol's header");
  }
  if (header->version < proto::kOldestVersion || header->version > proto::kVersion) {
    return protocol_error(session, header->request_id,
                          "protocol version " + std::to_string(header->version) +
                              ", the gateway speaks " + std::to_string(proto::kOldestVersion) +
                              " to " + std::to_string(proto::kVersion));
  }
  session.version = header->version;
  switch (header->type) {
    case proto::MessageType::kHello:
      return on_hello(session, header->request_id, packet);
    case proto::MessageType::kDeclare:
      return on_declare(session, header->request_id, packet);
    case proto::MessageType::kAllreduce:
      return on_allreduce(session, header->request_id, packet);
    case proto::MessageType::kDeclareCuda:
      return on_declare_cuda(session, header->request_id, packet);
    case proto::MessageType::kRelease:
      return on_release(session, header->request_id, packet);
    default:
      return protocol_error(
          session, header->request_id,
          "a message of unknown type " + std::to_string(static_cast<int>(header->type)));
  }
}

bool UnixIngressServer::on_hello(Session& session, uint64_t request_id,
                                 const proto::ReceivedPacket& packet) {
  const auto hello = proto::decode_body<proto::Hello>(packet.bytes);
  if (!hello || !packet.fds.empty()) {
    return protocol_error(session, request_id, "a malformed HELLO");
  }
  if (session.joined) return protocol_error(session, request_id, "a second HELLO");
  const Result<JobInfo> job = handler_->on_worker_joined(hello->local_rank);
  if (!job.ok() && job.status().code() == ErrorCode::kAborted) {
    // Not serving yet (joining_handler.h): the worker waits, nothing was refused for good.
    reply(session, request_id,
          proto::Error{static_cast<uint8_t>(hello_refusal(ErrorCode::kAborted, session.version)),
                       job.status().message()});
    return false;
  }
  if (!job.ok()) {
    const bool in_use = job.status().code() == ErrorCode::kUnavailable;
    // One line per rank in use (those are the node's ranks) and one for all the others, every
    // 10 s at most.
    const uint64_t log_key = in_use ? hello->local_rank : UINT64_MAX;
    if (auto suppressed = refused_worker_log_.admit(log_key)) {
      spdlog::warn("ingress session {}: worker {} refused: {} ({} more since the last line)",
                   session.id, hello->local_rank, job.status().to_string(), *suppressed);
    }
    ++workers_refused_;  // counted before the worker can see the refusal
    const gg_status status = hello_refusal(job.status().code(), session.version);
    reply(session, request_id,
          proto::Error{static_cast<uint8_t>(status), job.status().to_string()});
    return false;
  }
  session.joined = true;
  session.local_rank = hello->local_rank;
  const bool tells_timeout = session.version >= proto::kFirstVersionWithCollectiveTimeout;
  return reply(
      session, request_id,
      proto::HelloOk{job->node_rank, job->nodes, job->local_workers, job->world_size,
                     tells_timeout ? std::optional(job->collective_timeout_ms) : std::nullopt});
}

bool UnixIngressServer::on_declare(Session& session, uint64_t request_id,
                                   proto::ReceivedPacket& packet) {
  if (!session.joined) return protocol_error(session, request_id, "DECLARE before HELLO");
  const auto declare = proto::decode_body<proto::Declare>(packet.bytes);
  if (!declare) return protocol_error(session, request_id, "a malformed DECLARE");
  const std::string what = "DECLARE \"" + declare->name + "\"";
  if (packet.descriptors_lost) {
    // The worker sent its memfd, but this process's descriptor table is full: the worker did
    // nothing wrong, and its session goes on.
    ++descriptors_lost_;
    spdlog::warn(
        "ingress session {} (rank {}): {}: out of file descriptors, the buffer's was "
        "lost; raise the gateway's open-file limit",
        session.id, session.local_rank, what);
    return reply(session, request_id,
                 proto::Error{GG_RESOURCE_EXHAUSTED,
                              what + ": the gateway is out of file descriptors and could not "
                                     "take the buffer; raise its open-file limit"});
  }
  if (packet.fds.size() != 1) {
    return protocol_error(
        session, request_id,
        what + " with " + std::to_string(packet.fds.size()) + " descriptors (one memfd expected)");
  }
  if (const std::string error = proto::check_declare(*declare); !error.empty()) {
    return protocol_error(session, request_id, what + ": " + error);
  }
  const size_t bytes = declare->elements * proto::wire_dtype_bytes(declare->dtype);
  const int fd = packet.fds.front();
  packet.fds.clear();  // map_worker_buffer owns it now
  Result<MappedBuffer> mapped = map_worker_buffer(fd, bytes);
  if (!mapped.ok() && mapped.status().code() == ErrorCode::kResourceExhausted) {
    return refuse_declaration(session, request_id, what, GG_RESOURCE_EXHAUSTED,
                              what + ": " + mapped.status().message());
  }
  if (!mapped.ok()) {
    return protocol_error(session, request_id, what + ": " + mapped.status().message());
  }

  auto buffer = std::make_shared<const MappedBuffer>(std::move(mapped).value());
  return declared(session, request_id, *declare,
                  WorkerBuffer{buffer->data(), buffer->bytes(), buffer});
}

bool UnixIngressServer::on_declare_cuda(Session& session, uint64_t request_id,
                                        const proto::ReceivedPacket& packet) {
  if (!session.joined) return protocol_error(session, request_id, "DECLARE_CUDA before HELLO");
  const auto declare = proto::decode_body<proto::DeclareCuda>(packet.bytes);
  if (!declare) return protocol_error(session, request_id, "a malformed DECLARE_CUDA");
  const std::string what = "DECLARE_CUDA \"" + declare->tensor.name + "\"";
  if (!packet.fds.empty()) {
    return protocol_error(
        session, request_id,
        what + " with " + std::to_string(packet.fds.size()) + " descriptors (none expected)");
  }
  if (const std::string error = proto::check_declare(declare->tensor); !error.empty()) {
    return protocol_error(session, request_id, what + ": " + error);
  }
  // Refused, not a protocol error: the session goes on and the worker may declare a host buffer.
  if (const Status available = kernels::cuda_ipc_available(); !available.ok()) {
    return refuse_declaration(session, request_id, what, GG_REJECTED,
                              "this gateway cannot map CUDA memory: " + available.message());
  }
  const size_t bytes = declare->tensor.elements * proto::wire_dtype_bytes(declare->tensor.dtype);
  Result<WorkerBuffer> buffer =
      map_cuda_buffer(declare->buffer, bytes, session.cuda_allocations, cuda_mappings_);
  if (!buffer.ok()) {
    return refuse_declaration(session, request_id, what, GG_REJECTED,
                              what + ": " + buffer.status().message());
  }
  return declared(session, request_id, declare->tensor, std::move(buffer).value());
}

bool UnixIngressServer::declared(Session& session, uint64_t request_id,
                                 const proto::Declare& declare, WorkerBuffer buffer) {
  const Result<uint32_t> key = handler_->on_declare(session.local_rank, spec_of(declare), buffer);
  if (!key.ok()) {
    buffer = WorkerBuffer{};
    close_unused_allocations(session.cuda_allocations);  // one it opened for the refused buffer
    return refuse_declaration(session, request_id, "DECLARE \"" + declare.name + "\"",
                              to_client_status(key.status().code()), key.status().to_string());
  }
  auto [declared, first] = session.buffers.try_emplace(*key);
  mapped_bytes_ -= mapped_host_bytes(declared->second);  // 0 for a new entry
  mapped_bytes_ += mapped_host_bytes(buffer);
  declared->second = std::move(buffer);  // unmaps a buffer it replaces, unless a step holds it
  if (!first) close_unused_allocations(session.cuda_allocations);
  return reply(session, request_id, proto::DeclareOk{*key});
}

bool UnixIngressServer::on_allreduce(Session& session, uint64_t request_id,
                                     const proto::ReceivedPacket& packet) {
  if (!session.joined) return protocol_error(session, request_id, "ALLREDUCE before HELLO");
  const auto allreduce = proto::decode_body<proto::Allreduce>(packet.bytes);
  if (!allreduce || !packet.fds.empty()) {
    return protocol_error(session, request_id, "a malformed ALLREDUCE");
  }
  const uint32_t key = allreduce->key;
  if (!session.buffers.contains(key)) {
    return reply(session, request_id,
                 proto::Error{GG_REJECTED, "ALLREDUCE of key " + std::to_string(key) +
                                               ", which this worker did not declare"});
  }
  if (!session.in_flight.insert(key).second) {
    return reply(session, request_id,
                 proto::Error{GG_REJECTED, "ALLREDUCE of key " + std::to_string(key) +
                                               " while its previous all-reduce runs"});
  }
  handler_->on_allreduce(
      session.local_rank, key,
      [queue = queue_, session_id = session.id, request_id, key](AllreduceOutcome outcome) {
        queue->push(Completion{session_id, request_id, key, std::move(outcome)});
      });
  return true;
}

bool UnixIngressServer::on_release(Session& session, uint64_t request_id,
                                   const proto::ReceivedPacket& packet) {
  if (session.version < proto::kFirstVersionWithRelease) {
    return protocol_error(session, request_id,
                          "a RELEASE in protocol version " + std::to_string(session.version));
  }
  if (!session.joined) return protocol_error(session, request_id, "RELEASE before HELLO");
  const auto release = proto::decode_body<proto::Release>(packet.bytes);
  if (!release || !packet.fds.empty()) {
    return protocol_error(session, request_id, "a malformed RELEASE");
  }
  const uint32_t key = release->key;
  const auto declared = session.buffers.find(key);
  if (declared == session.buffers.end()) {
    return reply(session, request_id,
                 proto::Error{GG_REJECTED, "RELEASE of key " + std::to_string(key) +
                                               ", which this worker did not declare"});
  }
  if (session.in_flight.contains(key)) {
    return reply(session, request_id,
                 proto::Error{GG_INVALID_ARGUMENT, "RELEASE of key " + std::to_string(key) +
                                                       " while its all-reduce runs"});
  }
  handler_->on_release(session.local_rank, key);
  mapped_bytes_ -= mapped_host_bytes(declared->second);
  session.buffers.erase(declared);  // unmaps the buffer, unless a step still holds it
  close_unused_allocations(session.cuda_allocations);
  return reply(session, request_id, proto::ReleaseOk{key});
}

void UnixIngressServer::deliver(Completion& completion) {
  auto it = sessions_.find(completion.session_id);
  if (it == sessions_.end()) return;  // the worker left; nobody waits for this outcome
  Session& session = it->second;
  session.in_flight.erase(completion.key);
  const AllreduceOutcome& o = completion.outcome;
  proto::AllreduceDone done;
  done.status = static_cast<uint8_t>(to_client_status(o.status.code()));
  done.message = o.status.ok() ? "" : o.status.to_string();
  done.step = o.step;
  done.raw_bytes = o.raw_bytes;
  done.wire_bytes = o.wire_bytes;
  done.encode_seconds = o.encode_seconds;
  done.communicate_seconds = o.communicate_seconds;
  done.decode_seconds = o.decode_seconds;
  if (session.version >= proto::kFirstVersionWithCodec) {
    done.codec = static_cast<uint8_t>(to_client_codec(o.codec));
  }
  if (!reply(session, completion.request_id, done)) close_session(session.id);
}

template <typename Message>
bool UnixIngressServer::reply(Session& session, uint64_t request_id, const Message& message) {
  const auto packet = proto::encode(request_id, message, session.version);
  const int error = proto::send_packet(session.fd, packet, -1, MSG_DONTWAIT);
  if (error == 0) return true;
  spdlog::warn("ingress session {} (rank {}): send: {}", session.id, session.local_rank,
               error == EAGAIN ? "the worker does not read its replies" : std::strerror(error));
  return false;
}

bool UnixIngressServer::refuse_declaration(Session& session, uint64_t request_id,
                                           const std::string& what, gg_status status,
                                           const std::string& why) {
  ++declarations_refused_;  // counted before the worker can see the refusal
  if (auto suppressed = refused_declaration_log_.admit(session.local_rank)) {
    spdlog::warn("ingress session {} (rank {}): {} refused: {} ({} more since the last line)",
                 session.id, session.local_rank, what, why, *suppressed);
  }
  return reply(session, request_id, proto::Error{static_cast<uint8_t>(status), why});
}

bool UnixIngressServer::protocol_error(Session& session, uint64_t request_id,
                                       const std::string& why) {
  protocol_errors_++;
  spdlog::warn("ingress session {} (rank {}): protocol error: {}", session.id,
               session.joined ? std::to_string(session.local_rank) : "?", why);
  reply(session, request_id,
        proto::Error{GG_PROTOCOL_ERROR, "protocol error: the gateway received " + why});
  return false;
}

void UnixIngressServer::close_session(uint64_t session_id) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return;
  Session& session = it->second;
  if (session.joined) handler_->on_worker_left(session.local_rank);
  for (const auto& [key, buffer] : session.buffers) mapped_bytes_ -= mapped_host_bytes(buffer);
  close(session.fd);
  sessions_.erase(it);  // unmaps the buffers (and closes the GPU mappings) the core does not hold
  sessions_closed_++;
}

}  // namespace

std::unique_ptr<IngressServer> make_unix_ingress_server(const std::string& socket_path) {
  return std::make_unique<UnixIngressServer>(socket_path);
}

}  // namespace gradgate::gateway
