#include "service/scheduler.h"

#include "service/command.h"

namespace replayd::service {

void Scheduler::account(Lane lane, Clock::duration busy, Clock::time_point now) {
  if (now - window_start_ >= kWindow) {
    const bool skipped = now - window_start_ >= 2 * kWindow;
    learner_busy_[1] = skipped ? 0 : learner_busy_[0];
    explorer_busy_[1] = skipped ? 0 : explorer_busy_[0];
    learner_busy_[0] = explorer_busy_[0] = 0;
    window_start_ = now;
  }
  const double seconds = std::chrono::duration<double>(busy).count();
  if (lane == Lane::learner) {
    learner_busy_[0] += seconds;
  } else if (lane == Lane::explorer) {
    explorer_busy_[0] += seconds;
  }
}

double Scheduler::learner_busy_share() const {
  const double learner = learner_busy_[0] + learner_busy_[1];
  const double total = learner + explorer_busy_[0] + explorer_busy_[1];
  return total > 0 ? learner / total : 0.0;
}

bool Scheduler::explorer_should_yield() const {
  if (learner_share_ <= 0 || learners_.empty()) return false;
  if (learner_busy_share() >= learner_share_) return false;
  for (const Learner* learner : learners_) {
    if (learner->has_unread_bytes()) return true;
  }
  return false;
}

asio::awaitable<void> Scheduler::explorer_turn() {
  if (!explorer_should_yield()) co_return;
  auto executor = co_await asio::this_coro::executor;
  WaitQueue::Waiter waiter(served_, executor);
  co_await waiter.wait(Clock::now() + kMaxYield);
}

}  // namespace replayd::service
