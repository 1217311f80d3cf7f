// Keeps one outgoing connection alive: resolves and dials a lower-ranked peer, runs the dialing
// side of the handshake (with the Hello the owner makes at that moment), and hands the ready
// socket and both Hellos over. A failed attempt is retried after an
// exponential backoff (reset to the minimum after every successful handshake); so is a lost
// connection, once the owner calls redial(). Runs on the transport's thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/net/endpoint.h"
#include "gateway/transport/tcp/backoff.h"
#include "gateway/transport/tcp/wire.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway::tcp {

class Dialer {
 public:
  struct Options {
    std::function<Hello()> hello;  // what to send in the handshake, asked at every attempt
    uint64_t job_id = 0;           // the job expected to answer
    uint32_t target_rank = 0;      // the rank expected to answer
    net::Endpoint target;
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds reconnect_min{50};
    std::chrono::milliseconds reconnect_max{2000};
  };
  /// A handshaken socket to the target, with its answer and the Hello this side sent.
  using Connected =
      std::function<void(boost::asio::ip::tcp::socket, const Hello& theirs, const Hello& ours)>;
  /// An attempt to `dialed` failed (kIncompatible when a stranger answered; `refused` when the
  /// address refused the connection: nothing listens there); another one is scheduled.
  using Failed = std::function<void(const Status&, const net::Endpoint& dialed, bool refused)>;

  Dialer(boost::asio::io_context& io, Options options, Connected connected, Failed failed);
  Dialer(const Dialer&) = delete;
  Dialer& operator=(const Dialer&) = delete;

  /// Dials now.
  void dial();
  /// Dials again after the backoff delay (after a lost connection).
  void redial();
  /// Dials `target` from the next attempt on (an attempt under way goes on to the old one).
  void retarget(const net::Endpoint& target) { options_.target = target; }

 private:
  void connect(const boost::asio::ip::tcp::resolver::results_type& addresses);
  /// The error of a failed resolve or connect step: kTimeout once the deadline passed.
  Status step_failed(const char* step, const boost::system::error_code& ec) const;
  void attempt_failed(const Status& status, bool refused = false);

  boost::asio::io_context& io_;
  Options options_;
  Connected connected_;
  Failed failed_;
  Backoff backoff_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer timer_;  // the connect deadline, then the backoff wait
  bool timed_out_ = false;
  net::Endpoint dialing_;  // the target of the attempt under way
};

}  // namespace gradgate::gateway::tcp
