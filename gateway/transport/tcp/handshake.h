// The handshake on a freshly opened connection, before any frame flows. Both sides send a
// Hello (see wire.h): the dialing side writes first and then reads the answer; the accepting
// side reads first, decides on the Hello (and on the session it names), and answers only when it
// accepts (a stranger learns nothing). The whole exchange is bounded by a deadline.
//
// The completion runs once, on the socket's executor: with the peer's Hello (the accepting side:
// its own answer beside it) and the socket on success; otherwise with kIncompatible (the peer is
// not one of ours: wrong magic, version, job or rank), kTimeout, or kUnavailable (an I/O error),
// and the socket is closed.
#pragma once

#include <chrono>
#include <functional>

#include <boost/asio/ip/tcp.hpp>

#include "gateway/transport/tcp/wire.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway::tcp {

/// The dialing side: whether the answer is acceptable: ok, or kIncompatible saying why not.
using HelloCheck = std::function<Status(const Hello& theirs)>;
/// The accepting side: the answer to the peer's Hello, or kIncompatible saying why not.
using HelloAnswer = std::function<Result<Hello>(const Hello& theirs)>;
/// `ours` is what this side sent (the dialer's hello, or the acceptor's answer).
using HandshakeDone =
    std::function<void(Result<Hello> theirs, const Hello& ours, boost::asio::ip::tcp::socket)>;

/// Starts the dialing side's handshake on `socket`; returns at once.
void dial_handshake(boost::asio::ip::tcp::socket socket, const Hello& ours,
                    std::chrono::milliseconds timeout, HelloCheck check, HandshakeDone done);
/// Starts the accepting side's handshake on `socket`; returns at once. `answer` runs on the
/// socket's executor when the peer's Hello has come.
void accept_handshake(boost::asio::ip::tcp::socket socket, std::chrono::milliseconds timeout,
                      HelloAnswer answer, HandshakeDone done);

}  // namespace gradgate::gateway::tcp
