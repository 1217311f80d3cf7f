// A small synchronous HTTP/1.1 client for our own REST APIs (a gateway talking to the
// controller): one request per connection, connect, send and receive under one deadline (the
// name lookup is bounded by the system's resolver), JSON bodies, an optional bearer token, and
// cancellation from another thread (a long poll must not hold up a shutdown). Not for the open
// internet: no TLS, no redirects, no proxies.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/http/message.h"
#include "gradgate/base/status.h"

namespace boost::asio {
class io_context;
}

namespace gradgate::http {

/// Ends the requests that run with it (ClientOptions::cancel), from any thread: after cancel(),
/// a request that is connecting, sending or waiting for its answer returns kAborted at once, and
/// every later one returns kAborted without connecting. Outlives the requests that use it.
class RequestCancel {
 public:
  void cancel();

 private:
  friend class RunningRequest;
  std::mutex mutex_;
  bool cancelled_ = false;
  std::vector<boost::asio::io_context*> running_;
};

struct ClientOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string token;  // sent as "Authorization: Bearer <token>" when not empty
  std::chrono::milliseconds timeout{5000};  // connect, send and receive together
  std::size_t max_body_bytes = std::size_t{8} << 20;
  RequestCancel* cancel = nullptr;  // none: the request runs to its answer or its deadline
};

struct ClientResponse {
  unsigned status = 0;
  std::string content_type;
  std::string body;
};

/// Sends `method target` with `body` (as application/json when not empty) and reads the answer.
/// kUnavailable when the server cannot be reached or the connection breaks, kTimeout past the
/// deadline, kMalformedFrame for an answer that is not HTTP, kAborted once options.cancel was
/// cancelled. Any status code is a response.
Result<ClientResponse> send_request(const ClientOptions& options, verb method,
                                    const std::string& target, const std::string& body = {});

/// kUnavailable "<what> answered <status>: <the body's start>" unless `response` is a 200.
Status expect_ok(const ClientResponse& response, const std::string& what);

}  // namespace gradgate::http
