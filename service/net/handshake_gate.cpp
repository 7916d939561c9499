#include "service/net/handshake_gate.h"

#include <poll.h>

#include <sys/socket.h>

#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <cerrno>
#include <span>
#include <vector>

#include "service/net/auth.h"
#include "service/protocol/wire_frame.h"

namespace replayd::service {
namespace {

using namespace asio::experimental::awaitable_operators;
constexpr auto as_tuple = asio::experimental::as_tuple(asio::use_awaitable);
// While a frame is incomplete its bytes stay readable (peeked, not consumed), so readiness
// cannot tell when more arrive: look again after this pause.
constexpr std::chrono::milliseconds kRepeekDelay{20};

}  // namespace

const char* handshake_verdict_name(HandshakeVerdict verdict) {
  switch (verdict) {
    case HandshakeVerdict::authenticated:
      return "authenticated";
    case HandshakeVerdict::refused:
      return "refused";
    case HandshakeVerdict::timed_out:
      return "timed out";
    case HandshakeVerdict::closed:
      return "closed";
  }
  return "unknown";
}

asio::awaitable<HandshakeVerdict> await_hello(asio::ip::tcp::socket& socket, std::string_view token,
                                              std::uint32_t max_meta_bytes,
                                              std::chrono::steady_clock::time_point deadline) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  const FrameLimits limits{kHeaderBytes + max_meta_bytes, max_meta_bytes};
  std::vector<std::byte> peeked(kHeaderBytes + max_meta_bytes);
  std::size_t last_seen = 0;
  while (socket.is_open()) {
    if (std::chrono::steady_clock::now() >= deadline) co_return HandshakeVerdict::timed_out;
    timer.expires_at(last_seen == 0
                         ? deadline
                         : std::min(deadline, std::chrono::steady_clock::now() + kRepeekDelay));
    if (last_seen == 0) {
      auto ready = co_await (socket.async_wait(asio::socket_base::wait_read, as_tuple) ||
                             timer.async_wait(as_tuple));
      if (ready.index() == 1) co_return HandshakeVerdict::timed_out;
      if (std::get<0>(std::get<0>(ready))) co_return HandshakeVerdict::closed;
    } else {
      co_await timer.async_wait(as_tuple);
    }
    if (!socket.is_open()) break;
    const ssize_t n =
        ::recv(socket.native_handle(), peeked.data(), peeked.size(), MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) co_return HandshakeVerdict::closed;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      co_return HandshakeVerdict::closed;
    }
    last_seen = static_cast<std::size_t>(n);
    FrameDecoder decoder(limits);
    decoder.feed(std::span<const std::byte>(peeked.data(), last_seen));
    if (decoder.has_frame()) {
      const WireFrame frame = decoder.take_frame();
      co_return refuse_unauthenticated(token, frame.meta, frame.header.payload_bytes)
          ? HandshakeVerdict::refused
          : HandshakeVerdict::authenticated;
    }
    if (decoder.error() != DecodeError::none) co_return HandshakeVerdict::refused;
    // A peek never reaches the end of the stream while bytes are unread: a peer that sent
    // part of its request and closed is seen by POLLRDHUP, not by recv.
    pollfd descriptor{socket.native_handle(), POLLRDHUP, 0};
    if (::poll(&descriptor, 1, 0) > 0 && (descriptor.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
      co_return HandshakeVerdict::closed;
    }
  }
  co_return HandshakeVerdict::closed;
}

}  // namespace replayd::service
