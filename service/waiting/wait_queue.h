// WaitQueue: the one awaitable primitive of the server. A FIFO of suspended coroutines, each
// represented by a Waiter that lives in its coroutine's frame. Everything that waits (a
// sample held by the rate limiter, an insert held by the ratio, a connection's writer
// waiting for replies, a reader paused by backpressure) waits on one of these.
// Threading: io_context thread only.
//
// How a wait ends (WaitOutcome):
//   woken      wake_front() or wake_all() reached the waiter; it stays queued (at its
//              place) so it can re-check its condition and wait again, or leave().
//   timed_out  the waiter's deadline passed.
//   cancelled  cancel() or cancel_all(): the connection closed, the table was dropped, or the
//              server is stopping; cancel_reason() says which.
// Mechanism: each Waiter owns a steady_timer that expires at its deadline (or never); waking
// or cancelling it cancels the timer. One timer per waiter is the whole race between the
// event and the timeout, with no second operation to clean up.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <list>
#include <optional>

namespace replayd::service {

enum class WaitOutcome { woken, timed_out, cancelled };
enum class CancelReason { connection_closed, table_dropped, shutting_down };

class WaitQueue {
 public:
  class Waiter {
   public:
    // Joins the back of `queue`. The queue must outlive the Waiter or have been emptied.
    Waiter(WaitQueue& queue, const asio::any_io_executor& executor);
    ~Waiter();
    Waiter(const Waiter&) = delete;
    Waiter& operator=(const Waiter&) = delete;

    // Suspends until woken, cancelled or the deadline (nullopt: none). A wake or cancel that
    // happened since the last wait() returns at once.
    asio::awaitable<WaitOutcome> wait(
        std::optional<std::chrono::steady_clock::time_point> deadline);

    bool at_front() const { return queued_ && queue_->waiters_.front() == this; }
    bool queued() const { return queued_; }
    // Leaves the queue; the waiter behind it becomes the front. Idempotent.
    void leave();
    // Ends the current or next wait with `cancelled`.
    void cancel(CancelReason reason);
    std::optional<CancelReason> cancel_reason() const { return cancel_reason_; }

   private:
    friend class WaitQueue;
    void notify();

    WaitQueue* queue_;
    asio::steady_timer timer_;
    std::list<Waiter*>::iterator position_;
    bool queued_ = true;
    bool woken_ = false;
    std::optional<CancelReason> cancel_reason_;
  };

  WaitQueue() = default;
  WaitQueue(const WaitQueue&) = delete;
  WaitQueue& operator=(const WaitQueue&) = delete;
  ~WaitQueue();

  bool empty() const { return waiters_.empty(); }
  std::size_t size() const { return waiters_.size(); }
  // Wakes the waiter at the front, if any. O(1).
  void wake_front();
  // Wakes every waiter. O(n).
  void wake_all();
  // Cancels every waiter with `reason`; they stay queued until they leave(). O(n).
  void cancel_all(CancelReason reason);

 private:
  std::list<Waiter*> waiters_;
};

}  // namespace replayd::service
