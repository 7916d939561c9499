#include "service/scheduler.h"

#include <algorithm>
#include <cmath>

namespace replayd::service {

void Scheduler::set_learner_share(double share) {
  learner_share_ = std::clamp(share, 0.0, 0.999);
  explorer_bytes_per_learner_byte_ =
      learner_share_ > 0 ? (1.0 - learner_share_) / learner_share_ : 0.0;
  turns_.set_enabled(learner_share_ > 0);
}

void Scheduler::learner_progressed(std::uint64_t bytes) {
  const auto earned = static_cast<std::int64_t>(
      std::llround(static_cast<double>(bytes) * explorer_bytes_per_learner_byte_));
  credit_ = std::min(credit_ + earned, kBurstBytes);
  last_learner_progress_ = Clock::now();
  // One explorer at a time: the one woken wakes the next if credit is left when it goes on
  // (explorer_turn), so a small credit does not resume every waiting explorer.
  if (credit_ >= 0) progressed_.wake_front();
}

void Scheduler::explorer_moved(std::uint64_t bytes) {
  spend(bytes * kInsertByteCost);
}

void Scheduler::spend(std::uint64_t work) {
  credit_ = std::max(credit_ - static_cast<std::int64_t>(work), -kBurstBytes);
}

bool Scheduler::explorer_must_wait() const {
  if (learner_share_ <= 0 || credit_ >= 0) return false;
  if (Clock::now() - last_learner_progress_ > kStallAfter) return false;  // busy on its side
  return turns_.any_waits_for_server();
}

asio::awaitable<void> Scheduler::explorer_turn() {
  if (!explorer_must_wait()) co_return;
  auto executor = co_await asio::this_coro::executor;
  WaitQueue::Waiter waiter(progressed_, executor);
  // Until credit is earned, or the learners stop progressing (explorer_must_wait turns
  // false kStallAfter after their last progress: the deadline of each wait).
  while (explorer_must_wait()) {
    const WaitOutcome outcome = co_await waiter.wait(last_learner_progress_ + kStallAfter);
    if (outcome == WaitOutcome::cancelled) co_return;
  }
  waiter.leave();
  progressed_.wake_front();  // credit is left (or no learner waits): the next in line
}

SchedulerAccount::~SchedulerAccount() {
  if (lane_ == Lane::learner) scheduler_.remove_learner(&connection_);
}

void SchedulerAccount::sent(Lane lane) {
  if (lane == Lane::learner && lane_ != Lane::learner) {
    lane_ = Lane::learner;
    scheduler_.add_learner(&connection_);
  } else if (lane == Lane::explorer && lane_ == Lane::control) {
    lane_ = Lane::explorer;
  }
}

void SchedulerAccount::moved(std::uint64_t bytes) {
  if (lane_ == Lane::learner) {
    scheduler_.learner_progressed(&connection_, bytes);
  } else if (lane_ == Lane::explorer) {
    scheduler_.explorer_moved(bytes);
  }
}

void SchedulerAccount::worked(Scheduler::Clock::duration spent) {
  if (lane_ == Lane::learner) {
    scheduler_.learner_worked(&connection_, spent);
  } else if (lane_ == Lane::explorer) {
    scheduler_.explorer_worked(spent);
  }
}

}  // namespace replayd::service
