// IoPool: a few threads that do a file tier's disk work (writing rows out, reading cold rows
// back, deleting segments) so that the io_context thread never waits on the disk. A job
// runs on a pool thread; run_on_pool() suspends the calling coroutine until its result is
// posted back to the io_context (the futures/promises hand-off of the server's design).
// Lifetime: owned by the Server; shutdown() (or the destructor) runs the jobs queued and
// joins the threads, before the tables the jobs read are destroyed. The threads run at nice
// +10 (ThreadPriority::background): below the io_context thread, never starved.
// Threading: submit() from any thread; a job must touch nothing the io_context thread
// changes while it runs, except through what it was handed.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "service/waiting/posted_result.h"

namespace replayd::service {

class IoPool {
 public:
  explicit IoPool(std::size_t threads);
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // Queues `job` for a pool thread. After shutdown() the job runs on the calling thread.
  void submit(std::function<void()> job);
  // Runs every queued job and joins the threads. Idempotent.
  void shutdown();

 private:
  void work();
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// The result of `work`, run on `pool`; the caller is suspended until the result is posted
// back to its executor. Nothing cancels the wait: the work always completes.
template <typename T>
asio::awaitable<T> run_on_pool(IoPool& pool, std::function<T()> work) {
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  auto state = std::make_shared<PostedResult<T>>(executor);
  pool.submit(
      [state, work = std::move(work)]() mutable { PostedResult<T>::deliver(state, work()); });
  std::optional<T> result = co_await state->wait_until(asio::steady_timer::time_point::max());
  co_return std::move(*result);
}

}  // namespace replayd::service
