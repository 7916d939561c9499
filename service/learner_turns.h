// LearnerTurns: the fair share of the io_context thread among learner connections
// (docs/ARCHITECTURE.md, "Scheduling"), so that a learner of large samples cannot starve
// one of small samples. The scheduler owns it (service/scheduler.h); a learner's account
// reports its work here, and its session asks for its turn before it handles a request.
//
// Policy: a learner's work is counted as the scheduler counts it (bytes moved for it plus
// the thread's time on it, Scheduler::bytes_of). A learner more than kBurstBytes of work
// ahead of another learner that competes for the thread waits, before it handles its next
// request, until that learner catches up or stops competing, but never longer than its own
// last turn lasted (from the end of its last wait to this one; at most kMaxHold): learners
// that compete get turns of about equal length, so one that does little work in its turn
// (a learner of small samples, whose requests are mostly round trips) cannot hold the
// thread for a greedy one indefinitely either.
// A learner competes while it waits for the server (a request unread in its socket, a
// reply queued, or its own turn held here) and for kGap after its last progress: one that
// sends its next request once its reply arrives is between two requests, not gone, and a
// long request of the greedy learner started in that gap would hold the thread when it
// comes back (so the thread waits for it a little, as an anticipatory disk scheduler waits
// for a process's next nearby read). A learner found with no progress for kGap and nothing
// waiting is busy on its own side, out of the race; when it progresses again it starts
// level with the least-served learner that competes (idle time earns no credit). One whose
// request waited in its socket behind another's long request was not out: it keeps its
// place. The least-served competing learner never waits, so some learner always goes on.
// A request parked for data (rate limiter, minimum size) is no wait for the thread.
// Threading: io_context thread only.
#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <unordered_map>

#include "service/waiting/wait_queue.h"

namespace replayd::service {

// A learner connection, as the scheduler sees it.
class LearnerConnection {
 public:
  // Whether it waits for the server: a request unread in its socket, or a reply queued (a
  // request parked for data is no wait for the thread). O(1) (one FIONREAD ioctl at most).
  virtual bool waits_for_server() const = 0;

 protected:
  ~LearnerConnection() = default;
};

class LearnerTurns {
 public:
  using Clock = std::chrono::steady_clock;

  // How far (in bytes' worth of work) a learner may run ahead of a competing one.
  static constexpr std::uint64_t kBurstBytes = 4 << 20;
  // How long after its last progress a learner still competes (between two requests; it
  // covers a client descheduled for a time slice or two on a busy core).
  // The longest a learner waits for its turn: as long as its last turn lasted, at most this.
  static constexpr auto kMaxHold = std::chrono::milliseconds(100);
  static constexpr auto kGap = std::chrono::milliseconds(5);

  LearnerTurns() = default;
  LearnerTurns(const LearnerTurns&) = delete;
  LearnerTurns& operator=(const LearnerTurns&) = delete;

  // false: no learner ever waits (the scheduler's learner_share 0). Default true.
  void set_enabled(bool enabled) { enabled_ = enabled; }

  // Registration; a learner is removed before it is destroyed (waking the learners whose
  // turn it held). O(1); remove wakes the held learners, O(held).
  void add(const LearnerConnection* learner);
  void remove(const LearnerConnection* learner);
  bool empty() const { return accounts_.empty(); }

  // `work` bytes' worth was done for `learner` (moved for it, or the thread's time). Wakes
  // the held learners it may have caught up with. Nothing with one learner; else O(1),
  // O(learners) when the learner comes back out of the race or a learner is held.
  void progressed(const LearnerConnection* learner, std::uint64_t work);

  // Whether `learner` must wait before it handles a request (the policy). O(learners).
  // Marks the learners it finds out of the race (they start level when they come back).
  bool must_wait(const LearnerConnection* learner);
  // Suspends `learner` until it need not wait, or cancel_all(); returns at once when it
  // need not wait. Woken by the progress of the learners it waits for, by their removal,
  // and every kGap (a learner stops competing without an event).
  asio::awaitable<void> turn(const LearnerConnection* learner);
  // Whether some learner waits for the server, or for its turn here. O(learners).
  bool any_waits_for_server() const;
  // Whether `learner` waits for its turn now. O(1).
  bool holds(const LearnerConnection* learner) const;

  // Ends every wait (server stopping).
  void cancel_all() { held_.cancel_all(CancelReason::shutting_down); }

  // The work counted for `learner` (tests); 0 for one not registered.
  std::uint64_t work(const LearnerConnection* learner) const;

 private:
  struct Account {
    std::uint64_t work = 0;
    Clock::time_point last_progress{};
    bool held = false;
    bool out = true;  // found out of the race (or new): levels at its next progress
    // When its current turn began: when it last went on after waiting, or came back.
    Clock::time_point turn_began{};
  };

  // Whether `learner` competes for the thread now; marks it out when it does not.
  static bool competes(const LearnerConnection* learner, Account& account, Clock::time_point now);

  std::unordered_map<const LearnerConnection*, Account> accounts_;
  bool enabled_ = true;
  std::size_t held_count_ = 0;
  WaitQueue held_;
};

}  // namespace replayd::service
