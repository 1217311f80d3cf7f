// The answer of a deferred route (HttpServer::add_async_route): a route whose handler returns
// before it knows its response — a long poll, say — and answers later, from any thread, through
// a Responder.
//
//   server.add_async_route(verb::get, "/v1/policy", [&](const Request& request, Responder respond)
//   {
//     waiters.add(std::move(respond));  // answered later: respond(json_response(...))
//   });
//
// A Responder is a copyable handle; the first call sends the response, later calls are ignored.
// When the client has gone meanwhile, or the server has stopped, the call does nothing; a
// Responder that is never called leaves the client waiting until it closes or the server stops.
#pragma once

#include <functional>
#include <memory>

#include "common/http/message.h"

namespace gradgate::http {

class Responder {
 public:
  /// Sends a response (the server's side: see connection.cc). Called at most once.
  using Deliver = std::function<void(Response)>;

  explicit Responder(Deliver deliver);

  /// Sends `response` unless a response was sent already. Thread-safe.
  void operator()(Response response) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// What a deferred route does with a request: keep `respond` and call it once, now or later.
/// Runs on the server's I/O thread like a Handler; the Request is valid only during the call, so
/// copy what is needed later. An exception that escapes it answers 500 (unless it answered).
using AsyncHandler = std::function<void(const Request&, Responder)>;

}  // namespace gradgate::http
