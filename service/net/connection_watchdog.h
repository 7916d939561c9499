// The timeouts of one connection (docs/CONFIG.md, idle_timeout_ms and write_timeout_ms): a
// coroutine with one timer that sleeps until the earliest moment either rule could fire.
//   idle:  no complete request for idle_timeout_ms while nothing waits or is queued: the
//          connection answers a `timeout` error with request id 0 and closes.
//   write: queued replies of which no byte could be written for write_timeout_ms (the client
//          stopped reading): the socket is closed at once and the replies dropped.
// Lifetime: the connection owns the timer and outlives the coroutine (the coroutine holds
// it alive); cancelling the timer after closed() turns true ends the coroutine.
// Threading: io_context thread only.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>

namespace replayd::service {

// The connection as its watchdog sees it.
class WatchedConnection {
 public:
  using Clock = std::chrono::steady_clock;
  virtual bool closed() const = 0;     // the writer finished and the socket is closed
  virtual bool reading() const = 0;    // the reader has not stopped for good
  virtual bool quiescent() const = 0;  // reading, nothing parked, nothing queued
  virtual bool replies_queued() const = 0;
  virtual Clock::time_point last_activity() const = 0;
  // Since when queued replies wait for the kernel to take a byte.
  virtual Clock::time_point write_waiting_since() const = 0;
  // The idle rule fired: answer the timeout error and stop reading.
  virtual void close_idle(std::chrono::milliseconds idle_timeout) = 0;
  // The write rule fired: close the socket now (pending reads and writes end).
  virtual void close_stuck(std::chrono::milliseconds write_timeout) = 0;

 protected:
  ~WatchedConnection() = default;
};

// Runs the two rules until the connection is closed (or stuck and closed by the rule).
// A timeout of 0 disables its rule.
asio::awaitable<void> watch_connection(WatchedConnection& connection, asio::steady_timer& timer,
                                       std::chrono::milliseconds idle_timeout,
                                       std::chrono::milliseconds write_timeout);

}  // namespace replayd::service
