#include "gateway/transport/tcp/dialer.h"

#include <string>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/error.hpp>

#include "gateway/transport/tcp/handshake.h"

namespace gradgate::gateway::tcp {

namespace asio = boost::asio;
using boost::system::error_code;

Dialer::Dialer(asio::io_context& io, Options options, Connected connected, Failed failed)
    : io_(io),
      options_(std::move(options)),
      connected_(std::move(connected)),
      failed_(std::move(failed)),
      backoff_(options_.reconnect_min, options_.reconnect_max),
      resolver_(io),
      socket_(io),
      timer_(io) {}

void Dialer::dial() {
  timed_out_ = false;
  dialing_ = options_.target;
  timer_.expires_after(options_.connect_timeout);
  timer_.async_wait([this](const error_code& ec) {
    if (ec) return;  // cancelled: the connect finished first
    timed_out_ = true;
    resolver_.cancel();
    error_code ignored;
    socket_.close(ignored);
  });
  resolver_.async_resolve(
      dialing_.host, std::to_string(dialing_.port), asio::ip::tcp::resolver::numeric_service,
      [this](const error_code& ec, const asio::ip::tcp::resolver::results_type& addresses) {
        if (ec || timed_out_) return attempt_failed(step_failed("resolve", ec));
        connect(addresses);
      });
}

void Dialer::connect(const asio::ip::tcp::resolver::results_type& addresses) {
  asio::async_connect(socket_, addresses, [this](const error_code& ec, const auto&) {
    if (ec || timed_out_) {
      return attempt_failed(step_failed("connect", ec),
                            !timed_out_ && ec == asio::error::connection_refused);
    }
    timer_.cancel();
    error_code ignored;
    socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
    const uint32_t target_rank = options_.target_rank;
    const uint64_t job_id = options_.job_id;
    auto check = [target_rank, job_id](const Hello& theirs) -> Status {
      if (theirs.job_id != job_id) {
        return Status(ErrorCode::kIncompatible, "handshake: job " + std::to_string(theirs.job_id) +
                                                    " answered, expected " +
                                                    std::to_string(job_id));
      }
      if (theirs.rank != target_rank) {
        return Status(ErrorCode::kIncompatible, "handshake: rank " + std::to_string(theirs.rank) +
                                                    " answered, expected " +
                                                    std::to_string(target_rank));
      }
      return {};
    };
    dial_handshake(std::exchange(socket_, asio::ip::tcp::socket(io_)), options_.hello(),
                   options_.connect_timeout, std::move(check),
                   [this](Result<Hello> theirs, const Hello& ours, asio::ip::tcp::socket socket) {
                     if (!theirs.ok()) return attempt_failed(theirs.status());
                     backoff_.reset();
                     connected_(std::move(socket), *theirs, ours);
                   });
  });
}

Status Dialer::step_failed(const char* step, const error_code& ec) const {
  if (timed_out_) return Status(ErrorCode::kTimeout, std::string(step) + ": deadline passed");
  return Status(ErrorCode::kUnavailable, std::string(step) + ": " + ec.message());
}

void Dialer::attempt_failed(const Status& status, bool refused) {
  error_code ignored;
  socket_.close(ignored);
  failed_(status, dialing_, refused);
  redial();
}

void Dialer::redial() {
  timer_.cancel();
  timer_.expires_after(backoff_.next());
  timer_.async_wait([this](const error_code& ec) {
    if (!ec) dial();
  });
}

}  // namespace gradgate::gateway::tcp
