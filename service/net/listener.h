// Listeners: accept loops for TCP and Unix stream sockets. A listener only accepts and
// spawns a Session; it never dies on an accept error (e.g. EMFILE, out of descriptors): it
// logs (the first failure, then one summary per 10 s: metrics/log_throttle.h), waits
// kAcceptRetryDelay and tries again.
// Admission: each listener has its own budget of limits.max_connections sessions (so one
// listener's clients, or strangers, never lock out another's); one more is accepted and
// closed at once. TCP connections must authenticate (hello with the token) when
// context.auth_token is set; Unix ones never do (the socket file's mode guards them). Until
// its first request (hello) is complete, a TCP connection holds only one of
// limits.max_unauthenticated_connections pre-authentication slots (service/net/handshake_gate.h),
// for at most limits.auth_timeout_ms; a new one evicts the oldest when they are all taken.
// Threading: io_context thread only.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <chrono>

#include "service/service_context.h"

namespace replayd::service {

inline constexpr std::chrono::milliseconds kAcceptRetryDelay{100};

// Runs until the acceptor is closed.
asio::awaitable<void> accept_tcp(asio::ip::tcp::acceptor& acceptor, ServiceContext& context);
asio::awaitable<void> accept_unix(asio::local::stream_protocol::acceptor& acceptor,
                                  ServiceContext& context);

}  // namespace replayd::service
