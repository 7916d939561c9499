// Handshake gate: admission of a TCP connection that must authenticate, decided before a
// Session exists for it. The gate peeks (MSG_PEEK, nothing is consumed) at the connection's
// first request until it is complete, so the Session later reads the very same bytes and
// answers them as usual; strangers meanwhile hold only a small pre-authentication slot
// (limits.max_unauthenticated_connections), never one of the listener's max_connections.
// Threading: io_context thread only.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/ip/tcp.hpp>
#include <chrono>
#include <string_view>

namespace replayd::service {

enum class HandshakeVerdict {
  authenticated,  // the first request is hello with the right token
  refused,        // a complete first request that is not: the Session answers unauthenticated
  timed_out,      // no complete first request before the deadline
  closed,         // the peer closed, or the socket failed or was closed by the listener
};

// Waits (suspends) until the first request frame on `socket` is complete, the peer closes,
// or `deadline` passes; never reads past that frame and consumes nothing. A frame larger
// than header + `max_meta_bytes` or otherwise malformed is `refused`. Cancelled by closing
// the socket (then `closed`). Cost: one recv(MSG_PEEK) of up to 32 + max_meta_bytes bytes
// per arrival of bytes (at most one per 20 ms while the frame is incomplete).
asio::awaitable<HandshakeVerdict> await_hello(asio::ip::tcp::socket& socket, std::string_view token,
                                              std::uint32_t max_meta_bytes,
                                              std::chrono::steady_clock::time_point deadline);

const char* handshake_verdict_name(HandshakeVerdict verdict);

}  // namespace replayd::service
