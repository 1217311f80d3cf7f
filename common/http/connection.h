// One client connection of an HttpServer: reads requests within the limits and the timeout,
// answers each through dispatch(), keeps the connection alive when the client asks, and closes
// it gracefully after an error. Owned by its pending I/O operations. While a deferred route
// (responder.h) has not answered, the connection waits for its Responder and watches for the
// client closing.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <mutex>

#include "common/http/connection_slots.h"
#include "common/http/http_server.h"
#include "common/http/router.h"

namespace gradgate::http {

/// Lets Responders reach the server's I/O context only while it runs: the server closes the gate
/// before it stops, so that a Responder called later (from another thread) does nothing instead
/// of posting to a destroyed context.
class AnswerGate {
 public:
  /// Runs `post` if the gate is open; close() waits for it to return.
  template <typename Post>
  void run_if_open(Post&& post) {
    std::lock_guard lock(mutex_);
    if (open_) post();
  }
  void close() {
    std::lock_guard lock(mutex_);
    open_ = false;
  }

 private:
  std::mutex mutex_;
  bool open_ = true;
};

/// Serves `socket` until it closes, in one of `slots` (connection_slots.h); when every slot is
/// busy, answers 503 and closes. `options` and `router` must outlive the socket's io_context.
void serve_connection(boost::asio::ip::tcp::socket socket, const ServerOptions& options,
                      const Router& router, std::shared_ptr<AnswerGate> gate,
                      std::shared_ptr<ConnectionSlots> slots);

}  // namespace gradgate::http
