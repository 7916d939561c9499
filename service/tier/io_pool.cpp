#include "service/tier/io_pool.h"

#include "service/waiting/off_thread.h"

namespace replayd::service {

IoPool::IoPool(std::size_t threads) {
  for (std::size_t i = 0; i < threads; ++i)
    threads_.emplace_back([this] { work(); });
}

IoPool::~IoPool() {
  shutdown();
}

void IoPool::submit(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      jobs_.push_back(std::move(job));
      wake_.notify_one();
      return;
    }
  }
  job();
}

void IoPool::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_)
    if (thread.joinable()) thread.join();
}

void IoPool::work() {
  // Below the io_context thread: a pool thread sharing its core (a server pinned to one)
  // takes the time it leaves, and a request the io_context thread wakes for preempts it.
  lower_thread_priority(ThreadPriority::background);
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and every queued job ran
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace replayd::service
