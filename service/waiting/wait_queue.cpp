#include "service/waiting/wait_queue.h"

#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>

namespace replayd::service {

WaitQueue::Waiter::Waiter(WaitQueue& queue, const asio::any_io_executor& executor)
    : queue_(&queue), timer_(executor) {
  position_ = queue.waiters_.insert(queue.waiters_.end(), this);
}

WaitQueue::Waiter::~Waiter() {
  leave();
}

void WaitQueue::Waiter::leave() {
  if (!queued_) return;
  queue_->waiters_.erase(position_);
  queued_ = false;
}

void WaitQueue::Waiter::notify() {
  woken_ = true;
  timer_.cancel();
}

void WaitQueue::Waiter::cancel(CancelReason reason) {
  if (!cancel_reason_) cancel_reason_ = reason;
  timer_.cancel();
}

asio::awaitable<WaitOutcome> WaitQueue::Waiter::wait(
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (!cancel_reason_ && !woken_) {
    if (deadline) {
      timer_.expires_at(*deadline);
    } else {
      timer_.expires_at(std::chrono::steady_clock::time_point::max());
    }
    co_await timer_.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
  }
  if (cancel_reason_) co_return WaitOutcome::cancelled;
  if (woken_) {
    woken_ = false;
    co_return WaitOutcome::woken;
  }
  co_return WaitOutcome::timed_out;
}

WaitQueue::~WaitQueue() {
  // Waiters still queued must not point into a destroyed queue.
  for (Waiter* waiter : waiters_)
    waiter->queued_ = false;
}

void WaitQueue::wake_front() {
  if (!waiters_.empty()) waiters_.front()->notify();
}

void WaitQueue::wake_all() {
  for (Waiter* waiter : waiters_)
    waiter->notify();
}

void WaitQueue::cancel_all(CancelReason reason) {
  for (Waiter* waiter : waiters_)
    waiter->cancel(reason);
}

}  // namespace replayd::service
