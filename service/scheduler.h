// Scheduler: shares the one io_context thread between learners and explorers when it is
// saturated (docs/ARCHITECTURE.md, "Scheduling"). A connection becomes a learner when it sends
// a learner command (sample, update_priorities, delete); the others are explorers.
//
// Policy: when a learner has a request waiting in its socket and learners had less than
// `learner_share` of the thread's recent busy time, an explorer about to handle what it read
// first waits (at most `max_yield`) until a learner has been served. Explorers are never
// refused: they are only delayed, and the kernel's flow control makes their sends wait.
// Learners read with a readiness wait followed by a non-blocking read, so their requests stay
// visible in the socket (FIONREAD) until they are handled.
// Threading: io_context thread only.
#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <unordered_set>

#include "service/wait_queue.h"

namespace replayd::service {

enum class Lane : std::uint8_t;

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;

  // Something that can tell whether a learner's request waits in its socket.
  class Learner {
   public:
    virtual bool has_unread_bytes() const = 0;

   protected:
    ~Learner() = default;
  };

  // learner_share: 0 disables the policy; 0.5 (default) gives learners at least half.
  explicit Scheduler(double learner_share = 0.5) : learner_share_(learner_share) {}

  void set_learner_share(double share) { learner_share_ = share; }
  double learner_share() const { return learner_share_; }

  void add_learner(const Learner* learner) { learners_.insert(learner); }
  void remove_learner(const Learner* learner) { learners_.erase(learner); }

  // Time the thread spent handling requests of `lane` (measured by the sessions).
  void account(Lane lane, Clock::duration busy, Clock::time_point now);
  // A learner handled what it read: wakes the explorers that yielded to it.
  void learner_served() { served_.wake_all(); }

  // Whether an explorer should yield now (see the policy). O(learners).
  bool explorer_should_yield() const;
  // Suspends an explorer until a learner was served, the deadline of max_yield passed, or
  // the server stops. Returns at once when it need not yield.
  asio::awaitable<void> explorer_turn();

  static constexpr auto kMaxYield = std::chrono::milliseconds(2);
  // Busy time is counted in windows of this length; the share looks at the last two.
  static constexpr auto kWindow = std::chrono::milliseconds(50);

  // Ends every yield (server stopping).
  void cancel_all() { served_.cancel_all(CancelReason::shutting_down); }

 private:
  double learner_busy_share() const;

  double learner_share_;
  std::unordered_set<const Learner*> learners_;
  WaitQueue served_;
  Clock::time_point window_start_{};
  // [0]: current window, [1]: the one before; learner and explorer busy seconds.
  double learner_busy_[2] = {0, 0};
  double explorer_busy_[2] = {0, 0};
};

}  // namespace replayd::service
