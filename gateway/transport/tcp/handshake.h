// The handshake on a freshly opened connection, before any message flows. Both sides send a
// Hello (see wire.h): the dialing side writes first and then reads the answer; the accepting
// side reads first, checks the Hello, and answers only when it accepts (a stranger learns
// nothing). The whole exchange is bounded by a deadline.
//
// The completion runs once, on the socket's executor: with the peer's Hello and the socket on
// success; otherwise with kIncompatible (the peer is not one of ours: wrong magic, version, job
// or rank), kTimeout, or kUnavailable (an I/O error), and the socket is closed.
#pragma once

#include <chrono>
#include <functional>

#include <boost/asio/ip/tcp.hpp>

#include "gateway/transport/tcp/wire.h"
#include "gradgate/kernels/status.h"

namespace gradgate::gateway::tcp {

enum class HandshakeRole { kDialer, kAcceptor };

/// Decides whether the peer's Hello is acceptable: ok, or kIncompatible saying why not.
using HelloCheck = std::function<Status(const Hello& theirs)>;
using HandshakeDone = std::function<void(Result<Hello> theirs, boost::asio::ip::tcp::socket)>;

/// Starts the handshake on `socket`; returns at once.
void run_handshake(boost::asio::ip::tcp::socket socket, HandshakeRole role, const Hello& ours,
                   std::chrono::milliseconds timeout, HelloCheck check, HandshakeDone done);

}  // namespace gradgate::gateway::tcp
