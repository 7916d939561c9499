#include "service/listener.h"

#include <spdlog/spdlog.h>
#include <asio/experimental/as_tuple.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "metrics/log_throttle.h"
#include "service/session.h"

namespace replayd::service {
namespace {

constexpr auto as_tuple = asio::experimental::as_tuple(asio::use_awaitable);

template <typename Acceptor, typename Prepare>
asio::awaitable<void> accept_loop(Acceptor& acceptor, ServiceContext& context, const char* kind,
                                  bool requires_token, Prepare prepare) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer retry(executor);
  // At the descriptor limit accept fails every kAcceptRetryDelay: log the first failure,
  // then one summary per window, never a line per retry. Likewise for refusals.
  metrics::LogThrottle accept_errors_logged;
  metrics::LogThrottle refusals_logged;
  while (acceptor.is_open()) {
    auto [ec, socket] = co_await acceptor.async_accept(as_tuple);
    if (!acceptor.is_open() || context.shutting_down) break;
    if (ec) {
      if (auto line = accept_errors_logged.occur()) {
        spdlog::warn("{} accept failed: {}; retrying every {} ms{}", kind, ec.message(),
                     kAcceptRetryDelay.count(), line->suffix());
      }
      retry.expires_after(kAcceptRetryDelay);
      co_await retry.async_wait(as_tuple);
      continue;
    }
    if (context.sessions.size() >= context.limits.max_connections) {
      if (auto line = refusals_logged.occur()) {
        spdlog::warn("{} connection refused: max_connections = {} reached{}", kind,
                     context.limits.max_connections, line->suffix());
      }
      context.metrics.connection_refused();
      asio::error_code ignored;
      socket.close(ignored);
      continue;
    }
    prepare(socket);
    if (context.limits.socket_send_buffer_bytes > 0) {
      asio::error_code ignored;  // the kernel caps the size; a refusal keeps its default
      socket.set_option(asio::socket_base::send_buffer_size(
                            static_cast<int>(context.limits.socket_send_buffer_bytes)),
                        ignored);
    }
    auto session = std::make_shared<Session>(Session::Socket(std::move(socket)), context);
    if (requires_token) session->require_token();
    session->start();
  }
}

}  // namespace

asio::awaitable<void> accept_tcp(asio::ip::tcp::acceptor& acceptor, ServiceContext& context) {
  co_await accept_loop(acceptor, context, "tcp", !context.auth_token.empty(),
                       [](asio::ip::tcp::socket& socket) {
                         asio::error_code ignored;
                         socket.set_option(asio::ip::tcp::no_delay(true), ignored);
                       });
}

asio::awaitable<void> accept_unix(asio::local::stream_protocol::acceptor& acceptor,
                                  ServiceContext& context) {
  co_await accept_loop(acceptor, context, "unix", false,
                       [](asio::local::stream_protocol::socket&) {});
}

}  // namespace replayd::service
