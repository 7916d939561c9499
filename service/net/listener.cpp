#include "service/net/listener.h"

#include <spdlog/spdlog.h>
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <list>

#include "metrics/log_throttle.h"
#include "service/net/connection_budget.h"
#include "service/net/handshake_gate.h"
#include "service/net/session.h"

namespace replayd::service {
namespace {

constexpr auto as_tuple = asio::experimental::as_tuple(asio::use_awaitable);

void log_handshake_exit(std::exception_ptr error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    spdlog::error("tcp handshake coroutine failed: {}", e.what());
  }
}

// A TCP connection in the handshake; closed and dropped from the list when evicted.
struct PendingHandshake {
  asio::ip::tcp::socket* socket;
  bool evicted = false;
};

// What one listener keeps across its accepts. Shared with its handshake coroutines, which
// may outlive the accept loop by up to auth_timeout_ms.
struct ListenerState {
  ListenerState(const char* kind, std::size_t max_connections)
      : kind(kind), budget(max_connections) {}

  const char* kind;
  ConnectionBudget budget;
  // TCP connections whose first request is being awaited, oldest first.
  std::list<std::shared_ptr<PendingHandshake>> handshaking;
  metrics::LogThrottle accept_errors_logged;
  metrics::LogThrottle refusals_logged;
  metrics::LogThrottle evictions_logged;
  metrics::LogThrottle handshake_failures_logged;
};

template <typename Socket>
void refuse(ListenerState& state, ServiceContext& context, Socket& socket, const char* why) {
  if (auto line = state.refusals_logged.occur()) {
    spdlog::warn("{} connection refused: {}{}", state.kind, why, line->suffix());
  }
  context.metrics.connection_refused();
  asio::error_code ignored;
  socket.close(ignored);
}

// Starts a Session on `socket` and counts it in the listener's budget, or refuses it when
// the budget is full.
template <typename Socket>
void admit(ListenerState& state, ServiceContext& context, Socket socket, bool requires_token) {
  if (context.shutting_down) return;
  if (state.budget.full()) {
    refuse(state, context, socket, "max_connections reached on this listener");
    return;
  }
  if (context.limits.socket_send_buffer_bytes > 0) {
    asio::error_code ignored;  // the kernel caps the size; a refusal keeps its default
    socket.set_option(asio::socket_base::send_buffer_size(
                          static_cast<int>(context.limits.socket_send_buffer_bytes)),
                      ignored);
  }
  auto session = std::make_shared<Session>(Session::Socket(std::move(socket)), context);
  if (requires_token) session->require_token();
  state.budget.add(session);
  session->start();
}

// Holds a TCP connection in a pre-authentication slot until its first request is complete,
// then admits it (a wrong token too: its Session answers `unauthenticated` and closes).
asio::awaitable<void> handshake(std::shared_ptr<ListenerState> state, ServiceContext& context,
                                asio::ip::tcp::socket socket) {
  auto pending = std::make_shared<PendingHandshake>(PendingHandshake{&socket});
  const auto slot = state->handshaking.insert(state->handshaking.end(), pending);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(context.limits.auth_timeout_ms);
  const HandshakeVerdict verdict =
      co_await await_hello(socket, context.auth_token, context.limits.max_meta_bytes, deadline);
  if (!pending->evicted) state->handshaking.erase(slot);  // else erased by the eviction
  if (verdict == HandshakeVerdict::authenticated || verdict == HandshakeVerdict::refused) {
    admit(*state, context, std::move(socket), true);
    co_return;
  }
  if (verdict == HandshakeVerdict::timed_out) {
    if (auto line = state->handshake_failures_logged.occur()) {
      spdlog::warn("tcp connection closed: no hello within auth_timeout_ms = {}{}",
                   context.limits.auth_timeout_ms, line->suffix());
    }
  }
  asio::error_code ignored;
  socket.close(ignored);
}

// Makes room for one more handshake by closing the one waiting longest.
void evict_oldest_handshake(ListenerState& state, std::size_t max_handshakes) {
  if (state.handshaking.size() < max_handshakes || state.handshaking.empty()) return;
  const std::shared_ptr<PendingHandshake> oldest = state.handshaking.front();
  state.handshaking.pop_front();
  oldest->evicted = true;
  asio::error_code ignored;
  oldest->socket->close(ignored);  // its await_hello ends with `closed`
  if (auto line = state.evictions_logged.occur()) {
    spdlog::warn(
        "tcp: {} connections awaiting hello (max_unauthenticated_connections); closed the "
        "oldest{}",
        max_handshakes, line->suffix());
  }
}

template <typename Acceptor, typename OnAccept>
asio::awaitable<void> accept_loop(Acceptor& acceptor, ServiceContext& context, ListenerState& state,
                                  OnAccept on_accept) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer retry(executor);
  while (acceptor.is_open()) {
    auto [ec, socket] = co_await acceptor.async_accept(as_tuple);
    if (!acceptor.is_open() || context.shutting_down) break;
    if (ec) {
      // At the descriptor limit accept fails every kAcceptRetryDelay: log the first failure,
      // then one summary per window, never a line per retry.
      if (auto line = state.accept_errors_logged.occur()) {
        spdlog::warn("{} accept failed: {}; retrying every {} ms{}", state.kind, ec.message(),
                     kAcceptRetryDelay.count(), line->suffix());
      }
      retry.expires_after(kAcceptRetryDelay);
      co_await retry.async_wait(as_tuple);
      continue;
    }
    on_accept(std::move(socket));
  }
}

}  // namespace

asio::awaitable<void> accept_tcp(asio::ip::tcp::acceptor& acceptor, ServiceContext& context) {
  auto state = std::make_shared<ListenerState>("tcp", context.limits.max_connections);
  auto executor = co_await asio::this_coro::executor;
  co_await accept_loop(acceptor, context, *state, [&](asio::ip::tcp::socket socket) {
    asio::error_code ignored;
    socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    if (context.auth_token.empty()) {
      admit(*state, context, std::move(socket), false);
      return;
    }
    evict_oldest_handshake(*state, context.limits.max_unauthenticated_connections);
    asio::co_spawn(executor, handshake(state, context, std::move(socket)), log_handshake_exit);
  });
  // Handshakes still waiting end with the server: close their sockets.
  for (const auto& pending : state->handshaking) {
    asio::error_code ignored;
    pending->socket->close(ignored);
  }
}

asio::awaitable<void> accept_unix(asio::local::stream_protocol::acceptor& acceptor,
                                  ServiceContext& context) {
  ListenerState state("unix", context.limits.max_connections);
  co_await accept_loop(acceptor, context, state, [&](asio::local::stream_protocol::socket socket) {
    admit(state, context, std::move(socket), false);
  });
}

}  // namespace replayd::service
