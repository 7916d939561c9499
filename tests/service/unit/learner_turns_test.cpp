// Tests of service/learner_turns.h: a learner far ahead of another that competes for the
// thread waits for its turn; one that stopped competing holds no one, and comes back level.
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <thread>

#include "service/learner_turns.h"
#include "service/scheduler.h"

using namespace replayd::service;
using namespace std::chrono_literals;

namespace {

struct FakeLearner final : LearnerConnection {
  bool waiting = false;
  bool waits_for_server() const override { return waiting; }
};

constexpr std::uint64_t kBurst = LearnerTurns::kBurstBytes;

// Two learners: `greedy` 64 MiB of work ahead of `small`, which waits for the server (a
// request in its socket), so it competes however slow the machine; the greedy one's turn
// has lasted kTurn.
constexpr auto kTurn = std::chrono::milliseconds(50);

struct TwoLearners {
  asio::io_context io;
  LearnerTurns turns;
  FakeLearner greedy;
  FakeLearner small;

  TwoLearners() {
    small.waiting = true;
    turns.add(&greedy);
    turns.add(&small);
    turns.progressed(&small, 1);
    turns.progressed(&greedy, 64 << 20);
    std::this_thread::sleep_for(kTurn);
  }

  // Runs the io_context until `done` or 10 s; returns how long that took.
  std::chrono::steady_clock::duration run_until(const bool& done) {
    const auto start = std::chrono::steady_clock::now();
    while (!done && std::chrono::steady_clock::now() - start < 10s)
      io.run_one_for(10ms);
    return std::chrono::steady_clock::now() - start;
  }

  // Starts greedy's turn; `went_on` turns true when it may go on.
  void start_turn(bool& went_on) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await turns.turn(&greedy);
          went_on = true;
        },
        [](std::exception_ptr error) { REQUIRE_FALSE(error); });
    io.restart();  // it may have run out of work before
    io.poll();
  }
};

}  // namespace

TEST_CASE_METHOD(TwoLearners, "a learner far ahead of one that competes waits; the other never") {
  CHECK(turns.must_wait(&greedy));
  CHECK_FALSE(turns.must_wait(&small));
  // Level within the burst: neither waits.
  turns.progressed(&small, (64 << 20) - kBurst);
  CHECK_FALSE(turns.must_wait(&greedy));
  CHECK_FALSE(turns.must_wait(&small));
}

TEST_CASE_METHOD(TwoLearners, "a lone learner never waits, however much it did") {
  turns.remove(&small);
  CHECK_FALSE(turns.must_wait(&greedy));
}

TEST_CASE_METHOD(TwoLearners, "turns can be switched off (learner_share 0)") {
  turns.set_enabled(false);
  CHECK_FALSE(turns.must_wait(&greedy));
}

TEST_CASE_METHOD(TwoLearners,
                 "a learner between two requests competes for kGap, then only while it waits") {
  small.waiting = false;
  turns.progressed(&small, 1);  // a reply just went out; its next request is on its way
  CHECK(turns.must_wait(&greedy));
  std::this_thread::sleep_for(LearnerTurns::kGap + 1ms);
  CHECK_FALSE(turns.must_wait(&greedy));  // busy on its own side: the greedy one goes
  small.waiting = true;                   // a request unread in its socket
  CHECK(turns.must_wait(&greedy));
}

TEST_CASE_METHOD(TwoLearners, "a held learner goes on once the other catches up") {
  bool went_on = false;
  start_turn(went_on);
  REQUIRE_FALSE(went_on);
  CHECK(turns.holds(&greedy));
  CHECK(turns.any_waits_for_server());  // its held turn is a wait for the thread
  turns.progressed(&small, 32 << 20);   // not enough
  io.poll();
  CHECK_FALSE(went_on);
  turns.progressed(&small, 32 << 20);
  io.poll();
  CHECK(went_on);
  CHECK_FALSE(turns.holds(&greedy));
}

TEST_CASE_METHOD(TwoLearners, "a held learner goes on once the other stops competing") {
  bool went_on = false;
  start_turn(went_on);
  REQUIRE_FALSE(went_on);
  small.waiting = false;  // and it makes no more progress (for over kGap already)
  const auto waited = run_until(went_on);
  CHECK(went_on);
  CHECK(waited < kTurn);  // at the next look, kGap at most
}

TEST_CASE_METHOD(TwoLearners, "a held learner waits no longer than its last turn lasted") {
  bool went_on = false;
  start_turn(went_on);  // the small one competes all along and never catches up
  REQUIRE_FALSE(went_on);
  const auto waited = run_until(went_on);
  CHECK(went_on);
  CHECK(waited >= kTurn - 5ms);
  CHECK(waited < 20 * kTurn);
  // Its new turn has just begun: a wait right away is short.
  went_on = false;
  start_turn(went_on);
  CHECK(run_until(went_on) < waited);
}

TEST_CASE_METHOD(TwoLearners, "a held learner goes on when the other leaves") {
  bool went_on = false;
  start_turn(went_on);
  REQUIRE_FALSE(went_on);
  turns.remove(&small);
  io.poll();
  CHECK(went_on);
}

TEST_CASE_METHOD(TwoLearners, "a learner back from its own side starts level, without credit") {
  small.waiting = false;
  std::this_thread::sleep_for(LearnerTurns::kGap + 1ms);
  CHECK_FALSE(turns.must_wait(&greedy));  // the small one is out of the race
  turns.progressed(&greedy, 1);           // the greedy one goes on alone meanwhile
  turns.progressed(&small, 1);            // back: level with it
  CHECK(turns.work(&small) >= turns.work(&greedy));
  CHECK_FALSE(turns.must_wait(&greedy));
  turns.progressed(&greedy, 2 * kBurst);  // ahead again: it waits while the small one competes
  small.waiting = true;
  CHECK(turns.must_wait(&greedy));
}

TEST_CASE_METHOD(TwoLearners,
                 "a learner whose request waited behind a long request keeps its place") {
  // No progress for longer than kGap, but a request in its socket all along: still racing.
  std::this_thread::sleep_for(LearnerTurns::kGap + 1ms);
  CHECK(turns.must_wait(&greedy));
  turns.progressed(&small, 1);  // its request is handled at last
  CHECK(turns.work(&small) < turns.work(&greedy) - LearnerTurns::kBurstBytes);
  CHECK(turns.must_wait(&greedy));
}

TEST_CASE("a learner parked for data lets the explorers waiting for it go at once") {
  asio::io_context io;
  Scheduler scheduler(0.5);
  FakeLearner learner;
  learner.waiting = true;
  scheduler.add_learner(&learner);
  scheduler.learner_progressed(&learner, 0);
  scheduler.explorer_moved(Scheduler::kBurstBytes + 10);
  bool went_on = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await scheduler.explorer_turn();
        went_on = true;
      },
      [](std::exception_ptr error) { REQUIRE_FALSE(error); });
  io.poll();
  REQUIRE_FALSE(went_on);
  // Its sample parks for the explorers' inserts: it no longer waits for the server.
  learner.waiting = false;
  scheduler.learner_parked();
  io.poll();
  CHECK(went_on);
  scheduler.remove_learner(&learner);
}

TEST_CASE("the scheduler counts each learner's work for the turns") {
  Scheduler scheduler(0.7);
  FakeLearner one;
  FakeLearner two;
  two.waiting = true;
  scheduler.add_learner(&one);
  scheduler.add_learner(&two);
  scheduler.learner_progressed(&one, 1000);
  scheduler.learner_worked(&two, std::chrono::microseconds(10));
  CHECK(scheduler.learner_work(&one) == 1000);
  CHECK(scheduler.learner_work(&two) >= 10 * Scheduler::kBytesPerMicrosecond);
  scheduler.learner_progressed(&one, 64 << 20);
  CHECK(scheduler.learner_must_wait(&one));
  scheduler.set_learner_share(0);
  CHECK_FALSE(scheduler.learner_must_wait(&one));
  scheduler.remove_learner(&one);
  scheduler.remove_learner(&two);
}
