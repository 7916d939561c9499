#include "service/net/connection_watchdog.h"

#include <algorithm>
#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>

namespace replayd::service {

asio::awaitable<void> watch_connection(WatchedConnection& connection, asio::steady_timer& timer,
                                       std::chrono::milliseconds idle_timeout,
                                       std::chrono::milliseconds write_timeout) {
  using Clock = WatchedConnection::Clock;
  while (!connection.closed()) {
    const auto now = Clock::now();
    const bool quiescent = connection.quiescent();
    if (write_timeout.count() > 0 && connection.replies_queued() &&
        now - connection.write_waiting_since() >= write_timeout) {
      connection.close_stuck(write_timeout);
      co_return;
    }
    if (idle_timeout.count() > 0 && quiescent && now - connection.last_activity() >= idle_timeout) {
      connection.close_idle(idle_timeout);
      continue;
    }
    // Sleep until the earliest moment either rule could fire; a rule whose condition does not
    // hold now cannot fire sooner than one full timeout from now.
    auto next = now + std::chrono::hours(24);
    if (idle_timeout.count() > 0 && connection.reading()) {
      next = std::min(next, (quiescent ? connection.last_activity() : now) + idle_timeout);
    }
    if (write_timeout.count() > 0) {
      next = std::min(next, (connection.replies_queued() ? connection.write_waiting_since() : now) +
                                write_timeout);
    }
    timer.expires_at(next);
    co_await timer.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
  }
}

}  // namespace replayd::service
