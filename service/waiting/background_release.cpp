#include "service/waiting/background_release.h"

#include "service/waiting/off_thread.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace replayd::service {
namespace {

class ReleaseThread {
 public:
  ~ReleaseThread() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  void post(std::function<void()> release) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(release));
      if (!thread_.joinable()) {
        thread_ = std::thread([this] {
          // Below the io_context thread it may share a core with, yet never starved: what
          // is given back faster than it is freed would pile up.
          lower_thread_priority(ThreadPriority::background);
          run();
        });
      }
    }
    ready_.notify_one();
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to release
      std::function<void()> release = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      release();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

void release_in_background(std::function<void()> release) {
  static ReleaseThread thread;
  thread.post(std::move(release));
}

}  // namespace replayd::service
