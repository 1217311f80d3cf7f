#include "gateway/transport/dpdk_transport.h"

#include <time.h>

#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <spdlog/spdlog.h>

#include "gateway/transport/counters.h"
#include "gateway/transport/dpdk/peer_link.h"
#include "gateway/transport/send_checks.h"
#include "gradgate/base/log_throttle.h"

namespace gradgate::gateway {

using dpdk::Clock;

namespace {

constexpr std::size_t kBurst = 32;
/// Attempts to hand a burst to a busy port before its rest is dropped (and resent later).
constexpr int kTransmitAttempts = 64;
constexpr std::chrono::milliseconds kCpuSampleInterval{10};
/// With an idle sleep: how long the port must have been quiet before the thread sleeps.
constexpr std::chrono::microseconds kIdleBeforeSleep{200};

uint64_t thread_cpu_nanoseconds() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace

// The polling thread and what it drives: the port, one PeerLink per peer, the frames on their
// way out (a DatagramSink that writes into mbufs and sends them in bursts).
class DpdkTransport::Poller final : public dpdk::DatagramSink {
 public:
  explicit Poller(DpdkTransportOptions options)
      : options_(std::move(options)), down_counts_(options_.peers.size()) {}
  ~Poller() { stop(); }

  Status start(Handlers handlers);
  void stop();
  Status send(uint32_t to_rank, Message message);
  bool peer_up(uint32_t rank) const {
    return rank < links_.size() && links_[rank] && links_[rank]->up();
  }
  uint64_t peer_down_count(uint32_t rank) const {
    return rank < down_counts_.size() ? down_counts_[rank].load() : 0;
  }
  void update_peers(const std::vector<net::Endpoint>& peers);
  uint32_t rank() const { return options_.rank; }
  TransportStats stats() const { return counters_.snapshot(); }
  std::vector<LinkEstimate> links() const;

  std::span<std::byte> begin_datagram() override;
  void end_datagram(std::size_t bytes) override;

 private:
  enum class State { kIdle, kRunning, kStopped };

  Status check_options() const;
  reliable::Config reliable_config() const;
  void run();
  bool receive(Clock::time_point now);
  void report(uint32_t rank, dpdk::LinkEvents events);
  /// Points the links of the peers update_peers() listed elsewhere at their new addresses.
  void apply_moves();
  void queue_frame(rte_mbuf* frame);
  void flush();
  void sum_totals();

  DpdkTransportOptions options_;
  std::vector<std::atomic<uint64_t>> down_counts_;  // by rank: sessions lost (polling thread)
  Handlers handlers_;
  TransportCounters counters_;
  dpdk::UdpAddress own_;
  std::unique_ptr<dpdk::Port> port_;
  std::vector<std::unique_ptr<dpdk::PeerLink>> links_;  // by rank; null for our own
  std::unique_ptr<dpdk::Impairer> impairer_;

  // Polling thread only.
  const dpdk::PeerLink* sink_link_ = nullptr;  // whose datagrams the sink writes
  rte_mbuf* open_frame_ = nullptr;
  rte_mbuf* held_frame_ = nullptr;  // impairment: leaves after the next one
  std::array<rte_mbuf*, kBurst> outgoing_{};
  std::size_t outgoing_count_ = 0;

  std::mutex moves_mutex_;
  std::vector<net::Endpoint> moves_;  // guarded by moves_mutex_: the latest update_peers() list
  std::atomic<bool> moves_pending_{false};
  LogThrottle unusable_listing_log_{std::chrono::minutes(1)};  // polling thread; by rank

  std::mutex lifecycle_mutex_;
  State state_ = State::kIdle;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

Status DpdkTransport::Poller::check_options() const {
  const auto world = options_.peers.size();
  if (options_.rank >= world) {
    return Status(ErrorCode::kInvalidArgument, "transport: rank " + std::to_string(options_.rank) +
                                                   " is outside the " + std::to_string(world) +
                                                   " peers");
  }
  for (uint32_t rank = 0; rank < world; ++rank) {
    const net::Endpoint& peer = options_.peers[rank];
    if (!dpdk::parse_ipv4(peer.host).ok() || peer.port == 0) {
      return Status(ErrorCode::kInvalidArgument, "transport: rank " + std::to_string(rank) +
                                                     " needs an IPv4 address and a UDP "
                                                     "port for DPDK, got '" +
                                                     peer.to_string() + "'");
    }
  }
  if (dpdk::udp_payload_limit(options_.port.mtu) <= reliable::kDataOverheadBytes ||
      options_.port.mtu > 9000) {
    return Status(ErrorCode::kInvalidArgument, "transport: dpdk mtu must be in [128, 9000], got " +
                                                   std::to_string(options_.port.mtu));
  }
  if (options_.hello_interval.count() <= 0 || options_.peer_timeout < 4 * options_.hello_interval) {
    return Status(ErrorCode::kInvalidArgument,
                  "transport: dpdk peer_timeout must be at least 4 hello intervals");
  }
  GRADGATE_RETURN_IF_ERROR(dpdk::check(options_.impairments));
  return reliable::check(reliable_config());
}

reliable::Config DpdkTransport::Poller::reliable_config() const {
  reliable::Config config;
  config.payload_bytes = static_cast<uint32_t>(dpdk::udp_payload_limit(options_.port.mtu) -
                                               reliable::kDataOverheadBytes);
  config.max_rto = std::min<std::chrono::microseconds>(config.max_rto, options_.peer_timeout / 2);
  config.initial_rto = std::min(config.initial_rto, config.max_rto);
  config.message_deadline = options_.message_deadline;
  config.peer_timeout = options_.peer_timeout;
  config.max_queued_bytes = options_.send_queue_bytes;
  config.max_message_bytes = options_.max_message_bytes;
  return config;
}

Status DpdkTransport::Poller::start(Handlers handlers) {
  std::lock_guard lock(lifecycle_mutex_);
  if (state_ != State::kIdle) {
    return Status(ErrorCode::kAborted, "transport: start() after start() or stop()");
  }
  GRADGATE_RETURN_IF_ERROR(check_options());
  GRADGATE_RETURN_IF_ERROR(dpdk::init_eal(options_.eal));
  Result<std::unique_ptr<dpdk::Port>> port = dpdk::Port::open(options_.port);
  if (!port.ok()) return port.status();
  port_ = std::move(port).value();
  handlers_ = std::move(handlers);
  own_ = {*dpdk::parse_ipv4(options_.peers[options_.rank].host),
          options_.peers[options_.rank].port};
  links_.resize(options_.peers.size());
  for (uint32_t rank = 0; rank < options_.peers.size(); ++rank) {
    if (rank == options_.rank) continue;
    dpdk::PeerLink::Options link;
    link.config = reliable_config();
    link.job_id = options_.job_id;
    link.local_rank = options_.rank;
    link.peer_rank = rank;
    link.address = {*dpdk::parse_ipv4(options_.peers[rank].host), options_.peers[rank].port};
    link.hello_interval = options_.hello_interval;
    links_[rank] = std::make_unique<dpdk::PeerLink>(link);
  }
  impairer_ = std::make_unique<dpdk::Impairer>(options_.impairments);
  thread_ = std::thread([this] { run(); });
  state_ = State::kRunning;
  spdlog::info("transport: dpdk rank {} of job {} on port {} as {}:{}, {} peers", options_.rank,
               options_.job_id, port_->id(), options_.peers[options_.rank].host, own_.port,
               options_.peers.size() - 1);
  return {};
}

void DpdkTransport::Poller::stop() {
  std::lock_guard lock(lifecycle_mutex_);
  if (state_ == State::kStopped) return;
  const bool running = state_ == State::kRunning;
  state_ = State::kStopped;
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  for (const auto& link : links_) {
    if (link) link->reset("transport stopped");  // nothing reported: peer_up() and send() say down
  }
  if (running) {
    rte_pktmbuf_free(held_frame_);
    held_frame_ = nullptr;
  }
  counters_.peers_up = 0;
  port_.reset();
}

Status DpdkTransport::Poller::send(uint32_t to_rank, Message message) {
  GRADGATE_RETURN_IF_ERROR(check_send(to_rank, options_.rank, options_.peers.size(), message,
                                      options_.max_message_bytes));
  if (links_.empty() || stopping_) {
    return Status(ErrorCode::kUnavailable,
                  "transport: rank " + std::to_string(to_rank) + " is not connected");
  }
  return links_[to_rank]->send(std::move(message));
}

void DpdkTransport::Poller::update_peers(const std::vector<net::Endpoint>& peers) {
  std::lock_guard lock(moves_mutex_);
  moves_ = peers;
  moves_pending_ = true;
}

void DpdkTransport::Poller::apply_moves() {
  std::vector<net::Endpoint> peers;
  {
    std::lock_guard lock(moves_mutex_);
    peers.swap(moves_);
    moves_pending_ = false;
  }
  for (uint32_t rank = 0; rank < links_.size() && rank < peers.size(); ++rank) {
    const net::Endpoint& listed = peers[rank];
    if (!links_[rank] || listed.host.empty() || listed == options_.peers[rank]) continue;
    const Result<uint32_t> ip = dpdk::parse_ipv4(listed.host);
    if (!ip.ok() || listed.port == 0) {
      // The membership is listed again every report interval while the peer is down.
      if (auto suppressed = unusable_listing_log_.admit(rank)) {
        spdlog::warn(
            "transport: rank {} is listed at '{}', not an IPv4 address and UDP port: still sent "
            "to at {} ({} more since the last line)",
            rank, listed.to_string(), options_.peers[rank].to_string(), *suppressed);
      }
      continue;
    }
    spdlog::info("transport: rank {} moved from {} to {}", rank, options_.peers[rank].to_string(),
                 listed.to_string());
    options_.peers[rank] = listed;
    report(rank, links_[rank]->move_to({*ip, listed.port}));
  }
}

std::vector<LinkEstimate> DpdkTransport::Poller::links() const {
  std::vector<LinkEstimate> estimates;
  const auto now = Clock::now();
  for (const auto& link : links_) {
    if (link) estimates.push_back(link->estimate(now));
  }
  return estimates;
}

void DpdkTransport::Poller::run() {
  dpdk::bind_to_main_lcore();
  // As an lcore of its own, the thread gets the mbuf pool's per-lcore cache: without one every
  // frame's allocation and free would go to the shared ring.
  const bool registered = rte_thread_register() == 0;
  if (!registered) spdlog::warn("transport: dpdk: no lcore for the polling thread: no mbuf cache");
  uint64_t cpu_start = thread_cpu_nanoseconds();
  auto next_cpu_sample = Clock::now() + kCpuSampleInterval;
  auto last_busy = Clock::now();
  while (!stopping_) {
    if (moves_pending_) apply_moves();
    const auto now = Clock::now();
    const uint64_t sent_before = counters_.bytes_sent.load();
    const bool received = receive(now);
    for (uint32_t rank = 0; rank < links_.size(); ++rank) {
      if (!links_[rank]) continue;
      sink_link_ = links_[rank].get();
      dpdk::LinkEvents events = links_[rank]->service(now, *this);
      flush();
      report(rank, std::move(events));
    }
    if (now >= next_cpu_sample) {
      const uint64_t cpu = thread_cpu_nanoseconds();
      counters_.poll_cpu_nanoseconds += cpu - cpu_start;
      cpu_start = cpu;
      next_cpu_sample = now + kCpuSampleInterval;
      sum_totals();
    }
    if (received || counters_.bytes_sent.load() != sent_before) {
      last_busy = now;
    } else if (options_.idle_sleep.count() > 0 && now - last_busy > kIdleBeforeSleep) {
      std::this_thread::sleep_for(options_.idle_sleep);
    } else {
      std::this_thread::yield();
    }
  }
  counters_.poll_cpu_nanoseconds += thread_cpu_nanoseconds() - cpu_start;
  sum_totals();
  if (registered) rte_thread_unregister();
}

bool DpdkTransport::Poller::receive(Clock::time_point now) {
  std::array<rte_mbuf*, kBurst> frames{};
  const uint16_t count = port_->receive(frames);
  for (uint16_t i = 0; i < count; ++i) {
    rte_mbuf* frame = frames[i];
    const std::span<const std::byte> bytes(rte_pktmbuf_mtod(frame, const std::byte*),
                                           rte_pktmbuf_data_len(frame));
    const std::optional<dpdk::ParsedFrame> parsed =
        frame->nb_segs == 1 ? dpdk::parse_frame(bytes) : std::nullopt;
    if (parsed && parsed->dst == own_) {
      for (const auto& link : links_) {
        if (!link || !(link->address() == parsed->src)) continue;
        counters_.bytes_received += parsed->payload.size();
        link->on_datagram(parsed->payload, parsed->src_mac, now);
        break;
      }
    }
    rte_pktmbuf_free(frame);
  }
  return count > 0;
}

void DpdkTransport::Poller::report(uint32_t rank, dpdk::LinkEvents events) {
  if (events.came_up || events.restarted) {
    if (events.restarted) {
      ++counters_.disconnects;
      ++counters_.peers_down[static_cast<std::size_t>(PeerDownReason::kRestarted)];
      ++down_counts_[rank];
      spdlog::warn("transport: rank {} restarted", rank);
      if (handlers_.on_peer) handlers_.on_peer(rank, false);
    } else {
      ++counters_.peers_up;
      spdlog::info("transport: rank {} up", rank);
    }
    ++counters_.connects;
    if (handlers_.on_peer) handlers_.on_peer(rank, true);
  }
  // A session ends by a rejected message here, or, in the link, by silence or a deadline.
  PeerDownReason reason = PeerDownReason::kSilent;
  for (MessageBytes& message : events.messages) {
    ++counters_.messages_received;
    if (!handlers_.on_message || handlers_.on_message(rank, std::move(message))) continue;
    ++counters_.rejected;
    std::optional<std::string> lost = links_[rank]->reset("a message was rejected").lost;
    if (!events.lost) {
      events.lost = std::move(lost);
      reason = PeerDownReason::kProtocol;
    }
    break;  // the rest belonged to the dropped session
  }
  if (events.lost) {
    --counters_.peers_up;
    ++counters_.disconnects;
    ++counters_.peers_down[static_cast<std::size_t>(reason)];
    ++down_counts_[rank];
    spdlog::warn("transport: rank {} down: {}", rank, *events.lost);
    if (handlers_.on_peer) handlers_.on_peer(rank, false);
  }
}

std::span<std::byte> DpdkTransport::Poller::begin_datagram() {
  open_frame_ = port_->allocate();
  if (open_frame_ == nullptr) return {};
  return {rte_pktmbuf_mtod(open_frame_, std::byte*) + dpdk::kFrameHeaderBytes,
          dpdk::udp_payload_limit(port_->mtu())};
}

void DpdkTransport::Poller::end_datagram(std::size_t bytes) {
  rte_mbuf* frame = std::exchange(open_frame_, nullptr);
  if (bytes == 0) {
    rte_pktmbuf_free(frame);
    return;
  }
  dpdk::write_frame_headers(std::span<std::byte, dpdk::kFrameHeaderBytes>(
                                rte_pktmbuf_mtod(frame, std::byte*), dpdk::kFrameHeaderBytes),
                            port_->mac(), sink_link_->mac(), own_, sink_link_->address(), bytes);
  frame->data_len = static_cast<uint16_t>(dpdk::kFrameHeaderBytes + bytes);
  frame->pkt_len = frame->data_len;
  counters_.bytes_sent += bytes;
  switch (impairer_->next()) {
    case dpdk::Impairer::Fate::kSend:
      queue_frame(frame);
      break;
    case dpdk::Impairer::Fate::kDrop:
      rte_pktmbuf_free(frame);
      break;
    case dpdk::Impairer::Fate::kDuplicate:
      rte_mbuf_refcnt_update(frame, 1);
      queue_frame(frame);
      queue_frame(frame);
      break;
    case dpdk::Impairer::Fate::kHold:
      if (held_frame_ != nullptr) queue_frame(held_frame_);
      held_frame_ = frame;
      return;
  }
  if (held_frame_ != nullptr) queue_frame(std::exchange(held_frame_, nullptr));
}

void DpdkTransport::Poller::queue_frame(rte_mbuf* frame) {
  if (outgoing_count_ == outgoing_.size()) flush();
  outgoing_[outgoing_count_++] = frame;
}

void DpdkTransport::Poller::flush() {
  std::size_t sent = 0;
  for (int attempt = 0; attempt < kTransmitAttempts && sent < outgoing_count_; ++attempt) {
    sent += port_->transmit(std::span(outgoing_.data() + sent, outgoing_count_ - sent));
  }
  for (std::size_t i = sent; i < outgoing_count_; ++i) rte_pktmbuf_free(outgoing_[i]);
  outgoing_count_ = 0;
}

void DpdkTransport::Poller::sum_totals() {
  uint64_t retransmits = 0, acknowledged = 0, queued = 0, foreign = 0;
  for (const auto& link : links_) {
    if (!link) continue;
    const dpdk::LinkTotals totals = link->totals();
    retransmits += totals.retransmits;
    acknowledged += totals.messages_acknowledged;
    queued += totals.queued_bytes;
    foreign += totals.foreign;
  }
  counters_.retransmits = retransmits;
  counters_.messages_sent = acknowledged;
  counters_.queued_bytes = queued;
  counters_.foreign = foreign;
}

DpdkTransport::DpdkTransport(DpdkTransportOptions options)
    : poller_(std::make_unique<Poller>(std::move(options))) {}

DpdkTransport::~DpdkTransport() = default;

Status DpdkTransport::start(Handlers handlers) { return poller_->start(std::move(handlers)); }
void DpdkTransport::stop() { poller_->stop(); }
Status DpdkTransport::send(uint32_t to_rank, Message message) {
  return poller_->send(to_rank, std::move(message));
}
bool DpdkTransport::peer_up(uint32_t rank) const { return poller_->peer_up(rank); }
uint64_t DpdkTransport::peer_down_count(uint32_t rank) const {
  return poller_->peer_down_count(rank);
}
void DpdkTransport::update_peers(const std::vector<net::Endpoint>& peers) {
  poller_->update_peers(peers);
}
bool DpdkTransport::dials(uint32_t rank) const { return rank != poller_->rank(); }
TransportStats DpdkTransport::stats() const { return poller_->stats(); }
std::vector<LinkEstimate> DpdkTransport::links() const { return poller_->links(); }

}  // namespace gradgate::gateway
