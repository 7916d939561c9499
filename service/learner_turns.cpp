#include "service/learner_turns.h"

#include <algorithm>
#include <optional>

namespace replayd::service {

void LearnerTurns::add(const LearnerConnection* learner) {
  accounts_.try_emplace(learner);  // out: its first progress levels it with those competing
}

void LearnerTurns::remove(const LearnerConnection* learner) {
  accounts_.erase(learner);
  if (held_count_ > 0) held_.wake_all();  // it may have been the one they waited for
}

bool LearnerTurns::competes(const LearnerConnection* learner, Account& account,
                            Clock::time_point now) {
  if (account.held || now - account.last_progress < kGap || learner->waits_for_server())
    return true;
  account.out = true;
  return false;
}

void LearnerTurns::progressed(const LearnerConnection* learner, std::uint64_t work) {
  // A lone learner has no one to share with (a second one starts level with it, and it
  // with the second at its next progress: it is found out of the race then).
  if (accounts_.size() < 2) return;
  const auto found = accounts_.find(learner);
  if (found == accounts_.end()) return;
  Account& account = found->second;
  const auto now = Clock::now();
  if (account.out) {
    // Back from its own side: level with the least-served learner that competes.
    account.out = false;
    account.turn_began = now;
    std::optional<std::uint64_t> least;
    for (auto& [other, theirs] : accounts_) {
      if (other != learner && competes(other, theirs, now))
        least = std::min(least.value_or(theirs.work), theirs.work);
    }
    if (least) account.work = std::max(account.work, *least);
  }
  account.work += work;
  account.last_progress = now;
  if (held_count_ == 0) return;
  for (const auto& [other, theirs] : accounts_) {
    if (other != learner && theirs.held && theirs.work <= account.work + kBurstBytes) {
      held_.wake_all();  // caught up with a held learner: the held ones look again
      return;
    }
  }
}

bool LearnerTurns::must_wait(const LearnerConnection* learner) {
  if (!enabled_ || accounts_.size() < 2) return false;
  const auto mine = accounts_.find(learner);
  if (mine == accounts_.end()) return false;
  std::optional<Clock::time_point> now;
  for (auto& [other, theirs] : accounts_) {
    if (other == learner || mine->second.work <= theirs.work + kBurstBytes) continue;
    if (!now) now = Clock::now();
    if (competes(other, theirs, *now)) return true;
  }
  return false;
}

asio::awaitable<void> LearnerTurns::turn(const LearnerConnection* learner) {
  if (!must_wait(learner)) co_return;
  auto executor = co_await asio::this_coro::executor;
  // Held while this frame lives (a destroyed coroutine releases it too).
  struct Held {
    LearnerTurns& turns;
    const LearnerConnection* learner;
    Held(LearnerTurns& t, const LearnerConnection* l) : turns(t), learner(l) {
      turns.accounts_.at(learner).held = true;
      ++turns.held_count_;
    }
    ~Held() {
      if (const auto found = turns.accounts_.find(learner); found != turns.accounts_.end()) {
        found->second.held = false;
        found->second.turn_began = Clock::now();  // its next turn
      }
      --turns.held_count_;
    }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
  };
  const Held held(*this, learner);
  // At most as long as its last turn lasted: competing learners get turns of about equal
  // length, however little work the other does in its turn (one between two requests
  // often, or one busy on its side a little less than kGap each time).
  const auto now = Clock::now();
  const auto hold_until =
      now + std::min<Clock::duration>(kMaxHold, now - accounts_.at(learner).turn_began);
  WaitQueue::Waiter waiter(held_, executor);
  while (must_wait(learner) && Clock::now() < hold_until) {
    const WaitOutcome outcome =
        co_await waiter.wait(std::min<Clock::time_point>(hold_until, Clock::now() + kGap));
    if (outcome == WaitOutcome::cancelled) break;
  }
  waiter.leave();
}

bool LearnerTurns::any_waits_for_server() const {
  for (const auto& [learner, account] : accounts_) {
    if (account.held || learner->waits_for_server()) return true;
  }
  return false;
}

bool LearnerTurns::holds(const LearnerConnection* learner) const {
  const auto found = accounts_.find(learner);
  return found != accounts_.end() && found->second.held;
}

std::uint64_t LearnerTurns::work(const LearnerConnection* learner) const {
  const auto found = accounts_.find(learner);
  return found == accounts_.end() ? 0 : found->second.work;
}

}  // namespace replayd::service
