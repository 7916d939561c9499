// PostedResult: the hand-off of a result computed on another thread back to a coroutine on the
// io_context. The thread calls deliver(); the value is stored and the waiting coroutine woken
// by a handler posted to the io_context, so that everything the coroutine does with it happens
// on the io_context thread.
// Lifetime: shared by the thread and the coroutine (shared_ptr); if the io_context stops
// first, the posted handler is never run and the value is destroyed with it.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <memory>
#include <optional>

namespace replayd::service {

template <typename T>
class PostedResult {
 public:
  explicit PostedResult(const asio::any_io_executor& executor) : done_(executor) {
    done_.expires_at(asio::steady_timer::time_point::max());
  }

  // From any thread, once: posts `value` to the io_context, which stores it and wakes the
  // waiter.
  static void deliver(const std::shared_ptr<PostedResult>& state, T value) {
    asio::post(state->done_.get_executor(), [state, value = std::move(value)]() mutable {
      state->result_.emplace(std::move(value));
      state->done_.cancel();
    });
  }

  // Suspends until the value is there or `deadline` passes; the value, or nullopt.
  asio::awaitable<std::optional<T>> wait_until(asio::steady_timer::time_point deadline) {
    if (deadline != asio::steady_timer::time_point::max()) done_.expires_at(deadline);
    while (!result_ && asio::steady_timer::clock_type::now() < deadline) {
      co_await done_.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
    }
    co_return std::move(result_);
  }

 private:
  asio::steady_timer done_;  // cancelled by the posted handler: the value is there
  std::optional<T> result_;
};

}  // namespace replayd::service
