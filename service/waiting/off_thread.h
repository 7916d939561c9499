// Work too slow for the io_context thread (allocating or freeing gigabytes of a table) run on
// a thread of its own while the calling coroutine is suspended; the result comes back to the
// io_context as a posted handler that resumes the coroutine, so everything the caller does
// with it happens on the io_context thread again. The thread runs under SCHED_IDLE: on a
// core it shares with the io_context thread it takes only the time that thread leaves (a
// server pinned to one saturated core sets up a large table slowly, and answers everyone
// else on time meanwhile).
// Lifetime: the work and its result are owned by a shared state that both the thread and
// the posted handler hold; if the io_context stops first, the handler is never run and the
// result is destroyed with it. The io_context must outlive every such thread's post: its
// owner calls wait_for_off_thread_work() before destroying it.
// Threading: call from the io_context thread; `work` must touch nothing the io_context
// thread uses.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

namespace replayd::service {

// Lowers the calling thread's priority to SCHED_IDLE (nice +10 where that is refused), the
// thread only; failures are ignored.
void lower_thread_priority();

// Threads of run_off_thread that have not posted their result yet.
std::atomic<int>& off_thread_running();
// Blocks until every run_off_thread thread has posted its result (at shutdown).
void wait_for_off_thread_work();

template <typename T>
asio::awaitable<T> run_off_thread(std::function<T()> work) {
  struct State {
    explicit State(const asio::any_io_executor& executor) : done(executor) {}
    asio::steady_timer done;  // cancelled by the posted handler: the result is there
    std::optional<T> result;
  };
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  auto state = std::make_shared<State>(executor);
  state->done.expires_at(asio::steady_timer::time_point::max());
  ++off_thread_running();
  std::thread([state, work = std::move(work)]() mutable {
    lower_thread_priority();
    T result = work();
    asio::post(state->done.get_executor(), [state, result = std::move(result)]() mutable {
      state->result.emplace(std::move(result));
      state->done.cancel();
    });
    --off_thread_running();
  }).detach();
  while (!state->result) {
    co_await state->done.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
  }
  co_return std::move(*state->result);
}

}  // namespace replayd::service
