// One gateway's DPDK transport as a process, for the two-namespace test (tests/e2e/dpdk_veth.py):
// joins one peer over a DPDK port and either exchanges a set of messages with it or streams to
// it until it is lost. Prints one JSON line with what it saw; exit 0 when every check passed.
//
//   exchange: sends one message of each --sizes entry (bytes), receives the peer's, checks that
//             each arrived exactly once and byte-identical, waits until its own are acknowledged.
//   stream:   sends --sizes' largest message again and again while the peer is up; reports the
//             CLOCK_MONOTONIC time at which the peer went down (down_at).
// Every wait is bounded by --timeout-s. --transport tcp runs the same on TcpTransport (--nodes
// then being kernel addresses), for a side-by-side figure on the same link.
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gateway/transport/dpdk_transport.h"
#include "gateway/transport/tcp_transport.h"

namespace {

using gradgate::gateway::DpdkTransport;
using gradgate::gateway::DpdkTransportOptions;
using gradgate::gateway::Message;
using gradgate::gateway::MessageBytes;
using gradgate::gateway::Transport;
using Clock = std::chrono::steady_clock;

/// Message `index` from `rank`: `size` bytes of a pattern both sides can regenerate.
Message pattern(uint32_t rank, uint32_t index, std::size_t size) {
  auto bytes = std::make_shared<MessageBytes>(size);
  uint64_t state = (uint64_t{rank} << 32) ^ (index + 1) ^ size;
  for (std::size_t i = 0; i < size; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    (*bytes)[i] = std::byte(state >> 56);
  }
  if (size >= 4) std::memcpy(bytes->data(), &index, 4);
  return bytes;
}

double monotonic_seconds(Clock::time_point at) {
  return std::chrono::duration<double>(at.time_since_epoch()).count();
}

template <typename Predicate>
bool wait_until(Predicate done, Clock::time_point deadline) {
  while (!done()) {
    if (Clock::now() >= deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// The command line.
struct Args {
  uint32_t rank = 0;
  std::string iface, mode = "exchange", kind = "dpdk";
  std::vector<std::string> nodes;
  std::vector<std::size_t> sizes;
  double drop = 0.0, duplicate = 0.0, reorder = 0.0, timeout_s = 60.0;
  uint32_t peer_timeout_ms = 2000;
};

DpdkTransportOptions dpdk_options(const Args& args) {
  DpdkTransportOptions options;
  options.job_id = 42;
  options.rank = args.rank;
  for (const std::string& node : args.nodes) {
    const auto colon = node.rfind(':');
    options.peers.push_back(
        {node.substr(0, colon), static_cast<uint16_t>(std::stoul(node.substr(colon + 1)))});
  }
  options.eal.no_huge = true;
  options.eal.no_pci = true;
  options.eal.memory_mb = 512;
  options.eal.extra_args = {"--log-level=warning"};
  options.port.device =
      "net_af_packet" + std::to_string(args.rank) + ",iface=" + args.iface + ",framecnt=4096";
  options.peer_timeout = std::chrono::milliseconds(args.peer_timeout_ms);
  options.hello_interval = options.peer_timeout / 10;
  options.message_deadline = std::chrono::seconds(static_cast<int64_t>(args.timeout_s));
  options.impairments = {args.drop, args.duplicate, args.reorder, 1000 + args.rank};
  return options;
}

// The transport `kind` names: DPDK with `options`, or TCP between the same addresses.
std::unique_ptr<Transport> make_transport(const std::string& kind,
                                          const DpdkTransportOptions& options) {
  if (kind == "dpdk") return std::make_unique<DpdkTransport>(options);
  gradgate::gateway::TcpTransportOptions tcp;
  tcp.job_id = options.job_id;
  tcp.rank = options.rank;
  tcp.peers = options.peers;
  tcp.listen = options.peers[options.rank];
  tcp.probe_interval = std::chrono::milliseconds(0);
  return std::make_unique<gradgate::gateway::TcpTransport>(tcp);
}

// What arrived from the peer, by message index, and when the peer went down.
struct Inbox {
  std::mutex mutex;
  std::map<uint32_t, std::vector<MessageBytes>> received;  // by index
  std::atomic<bool> went_down{false};
  std::atomic<double> down_at{0.0};
};

Transport::Handlers handlers_into(Inbox& inbox) {
  Transport::Handlers handlers;
  handlers.on_message = [&inbox](uint32_t, MessageBytes&& message) {
    uint32_t index = 0;
    std::memcpy(&index, message.data(), std::min<std::size_t>(4, message.size()));
    if (message.size() < 4) index = 0;
    std::lock_guard lock(inbox.mutex);
    inbox.received[index].push_back(std::move(message));
    return true;
  };
  handlers.on_peer = [&inbox](uint32_t, bool up) {
    if (!up && !inbox.went_down.exchange(true)) inbox.down_at = monotonic_seconds(Clock::now());
  };
  return handlers;
}

// Whether every check of a mode passed, and the first that did not.
struct Outcome {
  bool ok;
  std::string error;
};

// exchange: one message of each size to the peer, each of the peer's exactly once and intact.
Outcome exchange(Transport& transport, uint32_t rank, uint32_t peer,
                 const std::vector<std::size_t>& sizes, Clock::time_point deadline, Inbox& inbox) {
  bool ok = true;
  std::string error;
  for (uint32_t i = 0; i < sizes.size() && ok; ++i) {
    gradgate::Status sent = transport.send(peer, pattern(rank, i, sizes[i]));
    while (sent.code() == gradgate::ErrorCode::kResourceExhausted && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      sent = transport.send(peer, pattern(rank, i, sizes[i]));
    }
    if (!sent.ok()) ok = false, error = sent.to_string();
  }
  const std::size_t want = sizes.size();
  ok = ok && wait_until(
                 [&] {
                   std::lock_guard lock(inbox.mutex);
                   std::size_t messages = 0;
                   for (const auto& [index, copies] : inbox.received) messages += copies.size();
                   return messages >= want && transport.stats().messages_sent >= want;
                 },
                 deadline);
  if (!ok && error.empty()) error = "timed out";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // late duplicates would show
  std::lock_guard lock(inbox.mutex);
  for (uint32_t i = 0; i < sizes.size() && ok; ++i) {
    const auto found = inbox.received.find(i);
    const Message expected = pattern(peer, i, sizes[i]);
    if (found == inbox.received.end() || found->second.size() != 1) {
      ok = false, error = "message " + std::to_string(i) + " did not arrive exactly once";
    } else if (found->second[0].size() != expected->size() ||
               std::memcmp(found->second[0].data(), expected->data(), expected->size()) != 0) {
      ok = false, error = "message " + std::to_string(i) + " differs";
    }
  }
  if (inbox.received.size() != sizes.size()) ok = false, error = "unexpected messages";
  return {ok, error};
}

// stream: the largest size again and again until the peer goes down.
Outcome stream(Transport& transport, uint32_t rank, uint32_t peer,
               const std::vector<std::size_t>& sizes, Clock::time_point deadline,
               const Inbox& inbox) {
  std::size_t largest = 0;
  for (const std::size_t size : sizes) largest = std::max(largest, size);
  for (uint32_t i = 0; i < 100000 && !inbox.went_down && Clock::now() < deadline; ++i) {
    gradgate::Status sent = transport.send(peer, pattern(rank, i, largest));
    if (!sent.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!inbox.went_down) return {false, "the peer never went down"};
  return {true, ""};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("DPDK transport peer for the two-namespace test");
  Args args;
  app.add_option("--rank", args.rank)->required();
  app.add_option("--iface", args.iface, "the veth end for net_af_packet")->required();
  app.add_option("--nodes", args.nodes, "ip:port of rank 0 and rank 1")->required()->expected(2);
  app.add_option("--sizes", args.sizes)->required();
  app.add_option("--mode", args.mode)->check(CLI::IsMember({"exchange", "stream"}));
  app.add_option("--transport", args.kind)->check(CLI::IsMember({"dpdk", "tcp"}));
  app.add_option("--drop", args.drop);
  app.add_option("--duplicate", args.duplicate);
  app.add_option("--reorder", args.reorder);
  app.add_option("--peer-timeout-ms", args.peer_timeout_ms);
  app.add_option("--timeout-s", args.timeout_s);
  CLI11_PARSE(app, argc, argv);

  const uint32_t peer = 1 - args.rank;
  Inbox inbox;
  const std::unique_ptr<Transport> chosen = make_transport(args.kind, dpdk_options(args));
  Transport& transport = *chosen;
  if (gradgate::Status started = transport.start(handlers_into(inbox)); !started.ok()) {
    std::printf("{\"ok\": false, \"error\": \"%s\"}\n", started.to_string().c_str());
    return 1;
  }
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000));
  if (!wait_until([&] { return transport.peer_up(peer); }, deadline)) {
    std::printf("{\"ok\": false, \"error\": \"the peer never came up\"}\n");
    return 1;
  }
  std::printf("{\"up\": true}\n");
  std::fflush(stdout);

  const auto began = Clock::now();
  const Outcome outcome = args.mode == "exchange"
                              ? exchange(transport, args.rank, peer, args.sizes, deadline, inbox)
                              : stream(transport, args.rank, peer, args.sizes, deadline, inbox);
  const double seconds = std::chrono::duration<double>(Clock::now() - began).count();
  // Leave the peer time to take our last ACKs before this side goes silent.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto stats = transport.stats();
  transport.stop();
  std::printf(
      "{\"ok\": %s, \"error\": \"%s\", \"seconds\": %.4f, \"down_at\": %.4f, \"retransmits\": "
      "%llu, "
      "\"bytes_sent\": %llu, \"poll_cpu_seconds\": %.3f}\n",
      outcome.ok ? "true" : "false", outcome.error.c_str(), seconds, inbox.down_at.load(),
      static_cast<unsigned long long>(stats.retransmits),
      static_cast<unsigned long long>(stats.bytes_sent), stats.poll_cpu_seconds);
  return outcome.ok ? 0 : 1;
}
