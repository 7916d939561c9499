// Scheduler: shares the one io_context thread between learners and explorers when it is
// saturated (docs/ARCHITECTURE.md, "Scheduling"). A connection becomes a learner when it sends
// a learner command (sample, update_priorities, delete), an explorer when it only inserts.
//
// Policy: work is counted in bytes moved for a connection (read from it, written to it), an
// inserted byte counting kInsertByteCost, plus the time the thread spent on it, at
// kBytesPerMicrosecond: handling each request (a request of a few hundred bytes, such as a
// step of compressed pixels, costs the thread far more than its bytes; a sample of stacked
// frames more than the bytes it sends), an explorer's reads, and the replies written at
// once (system calls that wake the client's process cost more than their bytes).
// While a learner waits for the server (a request unread in its socket, a reply queued, or
// its turn among learners held; not a request parked for data, such as a sample held by a
// samples_per_insert limiter: that one waits for the explorers), explorers may do at most
// (1 - learner_share) / learner_share of the work done for learners, plus a burst of
// kBurstBytes: an explorer over that budget waits, before it handles what it read, until
// learners' progress earned it credit. When no learner progressed for kStallAfter, learners
// are taken to be busy on their own side (training, not reading): explorers run freely
// until a learner progresses again. Explorers are never refused: they are delayed, and
// flow control makes their sends wait.
// Among learners, work is shared turn by turn (service/learner_turns.h): a learner far
// ahead of another that competes waits before its next request.
// learner_share 0 turns the whole policy off. Threading: io_context thread only.
#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <cstdint>

#include "service/learner_turns.h"
#include "service/waiting/wait_queue.h"

namespace replayd::service {

// Who typically sends a command, for scheduling: a connection that sends learner commands is
// protected from connections that send explorer commands.
enum class Lane : std::uint8_t { control, explorer, learner };

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;

  // A learner connection, as the scheduler sees it (service/learner_turns.h).
  using Learner = LearnerConnection;

  static constexpr std::int64_t kBurstBytes = 4 << 20;
  // An inserted byte costs the thread about twice a sampled one: it is copied from the socket
  // and again into the table, where a sampled row goes from the table to the socket once.
  static constexpr std::uint64_t kInsertByteCost = 2;
  // What a microsecond of the thread's work on a connection is worth in bytes moved
  // (about what it copies through a socket and a table in that time).
  static constexpr std::uint64_t kBytesPerMicrosecond = 4 << 10;
  // A learner with no progress for this long is busy on its own side (not reading).
  static constexpr auto kStallAfter = std::chrono::milliseconds(20);

  // learner_share: the share of the counted work learners get while they wait for the
  // thread, in [0, 1); 0 disables the policy (and the turns among learners). Default 0.7:
  // part of each connection's cost escapes the count (the reactor, and waking clients on
  // another core), and it falls mostly on explorers, which are many; at 0.7 learners keep
  // over half the thread (docs/BENCHMARKS.md, "Scheduling").
  explicit Scheduler(double learner_share = 0.7) { set_learner_share(learner_share); }
  void set_learner_share(double share);
  double learner_share() const { return learner_share_; }

  // Registration; a learner is removed before it is destroyed.
  void add_learner(const Learner* learner) { turns_.add(learner); }
  void remove_learner(const Learner* learner) { turns_.remove(learner); }
  bool has_learners() const { return !turns_.empty(); }

  // `bytes` were moved for a learner: earns explorers their share and, when the credit is
  // positive, wakes the first explorer waiting (it wakes the next: explorer_turn).
  void learner_progressed(std::uint64_t bytes);
  // The same, for `learner`: also counts its work for the turns among learners.
  void learner_progressed(const Learner* learner, std::uint64_t bytes) {
    turns_.progressed(learner, bytes);
    learner_progressed(bytes);
  }
  // A request of a learner parked for data (service/waiting/parking.h): the learner may no
  // longer wait for the server, so the first explorer waiting looks again (it may wait for
  // the learner, which now waits for the explorers' inserts).
  void learner_parked() { progressed_.wake_front(); }
  // `bytes` were read from an explorer; each costs kInsertByteCost learner bytes. The debt
  // is bounded by kBurstBytes, so a learner that comes back frees explorers quickly.
  void explorer_moved(std::uint64_t bytes);

  // The thread spent `spent` on a learner's / an explorer's connection (a request's
  // handler, a timed read or write).
  void learner_worked(Clock::duration spent) { learner_progressed(bytes_of(spent)); }
  void learner_worked(const Learner* learner, Clock::duration spent) {
    learner_progressed(learner, bytes_of(spent));
  }
  void explorer_worked(Clock::duration spent) { spend(bytes_of(spent)); }
  static std::uint64_t bytes_of(Clock::duration spent) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(spent).count();
    return ns > 0 ? static_cast<std::uint64_t>(ns) * kBytesPerMicrosecond / 1000 : 0;
  }

  // Whether an explorer must wait before it handles more (see the policy). O(learners).
  bool explorer_must_wait() const;
  // Suspends an explorer until it need not wait (credit earned, no learner waiting, or no
  // learner progress for kStallAfter) or the server stops; returns at once when it need not
  // wait.
  asio::awaitable<void> explorer_turn();

  // Whether `learner` must wait for its turn among learners before it handles a request
  // (service/learner_turns.h). O(1) with one learner, else O(learners).
  bool learner_must_wait(const Learner* learner) { return turns_.must_wait(learner); }
  // Suspends `learner` until its turn (LearnerTurns::turn); at once when it need not wait.
  asio::awaitable<void> learner_turn(const Learner* learner) { return turns_.turn(learner); }
  // Whether `learner` waits for its turn now.
  bool holds_turn(const Learner* learner) const { return turns_.holds(learner); }
  // The work counted for `learner` among learners (tests).
  std::uint64_t learner_work(const Learner* learner) const { return turns_.work(learner); }

  // Ends every wait (server stopping).
  void cancel_all() {
    progressed_.cancel_all(CancelReason::shutting_down);
    turns_.cancel_all();
  }

  // Explorer bytes still allowed before explorers wait (tests).
  std::int64_t credit() const { return credit_; }

 private:
  // Explorers did `work` (bytes' worth): their credit falls, down to -kBurstBytes.
  void spend(std::uint64_t work);

  double learner_share_ = 0.7;
  double explorer_bytes_per_learner_byte_ = 3.0 / 7.0;
  std::int64_t credit_ = kBurstBytes;
  Clock::time_point last_learner_progress_{};
  LearnerTurns turns_;  // the learners, and their turns among themselves
  WaitQueue progressed_;
};

// One connection's account with the scheduler: its lane, and what the thread did for it.
// The connection owns it; a learner's account registers the connection with the scheduler
// and leaves it when destroyed. Threading: io_context thread only.
class SchedulerAccount {
 public:
  SchedulerAccount(Scheduler& scheduler, const Scheduler::Learner& connection)
      : scheduler_(scheduler), connection_(connection) {}
  ~SchedulerAccount();
  SchedulerAccount(const SchedulerAccount&) = delete;
  SchedulerAccount& operator=(const SchedulerAccount&) = delete;

  // The connection sent a command of `lane`: a learner command makes it a learner for good,
  // an explorer command makes a control connection an explorer.
  void sent(Lane lane);
  Lane lane() const { return lane_; }
  // Whether learners share the thread now (the scheduler has something to arbitrate).
  bool shared() const { return scheduler_.has_learners(); }
  // `bytes` were moved (read or written) for the connection.
  void moved(std::uint64_t bytes);
  // The thread spent `spent` on the connection (a request's handler, a timed read or write).
  void worked(Scheduler::Clock::duration spent);

 private:
  Scheduler& scheduler_;
  const Scheduler::Learner& connection_;
  Lane lane_ = Lane::control;
};

}  // namespace replayd::service
