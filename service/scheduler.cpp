#include "service/scheduler.h"

#include <algorithm>
#include <cmath>

namespace replayd::service {

void Scheduler::set_learner_share(double share) {
  learner_share_ = std::clamp(share, 0.0, 0.999);
  explorer_bytes_per_learner_byte_ =
      learner_share_ > 0 ? (1.0 - learner_share_) / learner_share_ : 0.0;
}

void Scheduler::learner_progressed(std::uint64_t bytes) {
  const auto earned = static_cast<std::int64_t>(
      std::llround(static_cast<double>(bytes) * explorer_bytes_per_learner_byte_));
  credit_ = std::min(credit_ + earned, kBurstBytes);
  progressed_.wake_all();
}

bool Scheduler::explorer_must_wait() const {
  if (learner_share_ <= 0 || credit_ >= 0) return false;
  for (const Learner* learner : learners_) {
    if (learner->waits_for_server()) return true;
  }
  return false;
}

asio::awaitable<void> Scheduler::explorer_turn() {
  if (!explorer_must_wait()) co_return;
  auto executor = co_await asio::this_coro::executor;
  WaitQueue::Waiter waiter(progressed_, executor);
  const auto deadline = Clock::now() + kMaxYield;
  while (explorer_must_wait()) {
    const WaitOutcome outcome = co_await waiter.wait(deadline);
    if (outcome == WaitOutcome::cancelled) break;
    if (outcome == WaitOutcome::timed_out) {
      credit_ = kBurstBytes;  // no learner progressed for kMaxYield: it is busy on its own side
      break;
    }
  }
}

}  // namespace replayd::service
