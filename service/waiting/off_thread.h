// Work too slow for the io_context thread (allocating or freeing gigabytes of a table) run on
// a thread of its own while the calling coroutine is suspended; the result comes back to the
// io_context as a posted handler that resumes the coroutine, so everything the caller does
// with it happens on the io_context thread again. The thread runs under SCHED_IDLE: on a
// core it shares with the io_context thread it takes only the time that thread leaves (a
// server pinned to one saturated core sets up a large table slowly, and answers everyone
// else on time meanwhile). run_off_thread_for bounds the wait: the work goes on, its
// result dropped, when the caller can proceed without it.
// Lifetime: the work and its result are owned by a shared state that both the thread and
// the posted handler hold; if the io_context stops first, the handler is never run and the
// result is destroyed with it. The io_context must outlive every such thread's post: its
// owner calls wait_for_off_thread_work() before destroying it.
// Threading: call from the io_context thread; `work` must touch nothing the io_context
// thread uses.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "service/waiting/posted_result.h"

namespace replayd::service {

// How far below the io_context thread a helper thread runs (the calling thread only;
// failures are ignored). idle: SCHED_IDLE (nice +10 where that is refused), preempted at
// once when a normal thread wakes, but nearly starved while the core is saturated: for work
// whose delay harms nobody else. background: nice +10, a tenth of a contended core at
// least, a scheduler tick's delay to the io_context thread now and then: for work that
// must keep up (freeing memory at the rate it is given back).
enum class ThreadPriority { idle, background };
void lower_thread_priority(ThreadPriority priority);

// Threads of run_off_thread that have not posted their result yet.
std::atomic<int>& off_thread_running();
// Blocks until every run_off_thread thread has posted its result (at shutdown).
void wait_for_off_thread_work();

// The result of `work`, or nullopt once `max_wait` has passed without it (the thread goes
// on; its result is dropped when it comes).
template <typename T>
asio::awaitable<std::optional<T>> run_off_thread_for(std::function<T()> work,
                                                     asio::steady_timer::duration max_wait) {
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  auto state = std::make_shared<PostedResult<T>>(executor);
  const bool bounded = max_wait != asio::steady_timer::duration::max();
  const auto deadline = bounded ? asio::steady_timer::clock_type::now() + max_wait
                                : asio::steady_timer::time_point::max();
  ++off_thread_running();
  std::thread([state, work = std::move(work)]() mutable {
    lower_thread_priority(ThreadPriority::idle);
    PostedResult<T>::deliver(state, work());
    --off_thread_running();
  }).detach();
  co_return co_await state->wait_until(deadline);
}

template <typename T>
asio::awaitable<T> run_off_thread(std::function<T()> work) {
  std::optional<T> result =
      co_await run_off_thread_for(std::move(work), asio::steady_timer::duration::max());
  co_return std::move(*result);
}

}  // namespace replayd::service
