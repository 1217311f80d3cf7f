// A job of P gateways' collective layers in one test process over in-process transports
// (MemoryTransport), one mailbox and one collective engine each. The transports' own tests are
// in tests/unit/transport; the gateways over real TCP in tests/integration.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gateway/collective/collective_engine.h"
#include "gateway/collective/mailbox.h"
#include "gateway/transport/memory/memory_transport.h"

namespace gradgate::gateway::testing {

inline constexpr uint64_t kJobId = 42;

struct CollectiveNode {
  std::unique_ptr<Mailbox> mailbox;
  std::unique_ptr<CollectiveEngine> engine;
  std::unique_ptr<MemoryTransport> transport;  // destroyed first: its thread calls the engine
};

class Cluster {
 public:
  /// The nodes from rank `started` on have their engines but their transports are not started
  /// (start_transport): peers that are not connected yet.
  Cluster(uint32_t nodes, std::chrono::milliseconds timeout, uint32_t started = UINT32_MAX)
      : timeout_(timeout), started_(started), fabric_(nodes) {
    for (uint32_t rank = 0; rank < nodes; ++rank) start_node(rank, nodes);
  }
  ~Cluster() {
    for (auto& node : nodes_) node.mailbox->shutdown();
    for (auto& node : nodes_) node.transport->stop();
  }

  uint32_t size() const { return static_cast<uint32_t>(nodes_.size()); }
  CollectiveNode& node(uint32_t rank) { return nodes_[rank]; }

  /// Starts the transport of a node the constructor left unstarted.
  void start_transport(uint32_t rank) {
    if (!nodes_[rank].transport->start(handlers_[rank]).ok()) {
      throw std::runtime_error("transport start");
    }
  }

  /// True once every mailbox sees every peer up (bounded wait).
  bool wait_connected(std::chrono::seconds limit = std::chrono::seconds(10)) {
    const auto deadline = Clock::now() + limit;
    for (uint32_t rank = 0; rank < size(); ++rank) {
      for (uint32_t peer = 0; peer < size(); ++peer) {
        if (peer != rank && !nodes_[rank].mailbox->wait_peer_up(peer, deadline).ok()) return false;
      }
    }
    return true;
  }

  /// Runs `body(rank)` on one thread per node and waits for all.
  void on_every_node(const std::function<void(uint32_t)>& body) {
    std::vector<std::thread> threads;
    for (uint32_t rank = 0; rank < size(); ++rank) threads.emplace_back(body, rank);
    for (auto& thread : threads) thread.join();
  }

 private:
  void start_node(uint32_t rank, uint32_t nodes) {
    CollectiveNode node;
    node.transport = std::make_unique<MemoryTransport>(fabric_, rank);
    node.mailbox = std::make_unique<Mailbox>(nodes, *node.transport, 1ull << 30,
                                             std::chrono::milliseconds(60000));
    node.engine = std::make_unique<CollectiveEngine>(
        CollectiveOptions{rank, nodes, kJobId, timeout_}, *node.transport, *node.mailbox);
    Transport::Handlers handlers = node.engine->transport_handlers();
    if (rank < started_) {
      if (!node.transport->start(handlers).ok()) throw std::runtime_error("transport start");
    }
    handlers_.push_back(std::move(handlers));
    nodes_.push_back(std::move(node));
  }

  std::chrono::milliseconds timeout_;
  uint32_t started_;
  MemoryFabric fabric_;  // outlives the transports
  std::vector<CollectiveNode> nodes_;
  std::vector<Transport::Handlers> handlers_;  // by rank
};

}  // namespace gradgate::gateway::testing
