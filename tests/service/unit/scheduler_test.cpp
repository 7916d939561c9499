// Tests of service/scheduler.h: explorers wait for learners only while a learner waits for
// the server and explorers used up their share; never longer than the learner keeps
// progressing (kStallAfter).
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <thread>

#include "service/scheduler.h"

using namespace replayd::service;
using namespace std::chrono_literals;

namespace {

struct FakeLearner final : Scheduler::Learner {
  bool waiting = false;
  bool waits_for_server() const override { return waiting; }
};

// Runs one explorer_turn; returns how long it took.
std::chrono::steady_clock::duration turn(asio::io_context& io, Scheduler& scheduler,
                                         std::function<void()> meanwhile = {}) {
  bool done = false;
  const auto start = std::chrono::steady_clock::now();
  auto finished = start;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await scheduler.explorer_turn();
        finished = std::chrono::steady_clock::now();
        done = true;
      },
      [](std::exception_ptr error) { REQUIRE_FALSE(error); });
  io.poll();
  if (meanwhile) meanwhile();
  while (!done)
    io.run_one_for(10ms);
  io.restart();
  return finished - start;
}

// A share of 0.5, a learner waiting for the server that progressed just now, and explorers
// just over their share.
struct ExplorersOverShare {
  asio::io_context io;
  Scheduler scheduler{0.5};
  FakeLearner learner;

  ExplorersOverShare() {
    learner.waiting = true;
    scheduler.add_learner(&learner);
    scheduler.learner_progressed(0);
    scheduler.explorer_moved(Scheduler::kBurstBytes + 10);
  }
  ~ExplorersOverShare() { scheduler.remove_learner(&learner); }
};

}  // namespace

TEST_CASE("explorers run freely while no learner waits for the server") {
  asio::io_context io;
  Scheduler scheduler(0.5);
  FakeLearner learner;
  scheduler.add_learner(&learner);
  scheduler.learner_progressed(0);      // a learner active just now
  scheduler.explorer_moved(100 << 20);  // far over their share
  CHECK_FALSE(scheduler.explorer_must_wait());
  learner.waiting = true;
  CHECK(scheduler.explorer_must_wait());
  scheduler.remove_learner(&learner);
  CHECK_FALSE(scheduler.explorer_must_wait());
}

TEST_CASE("learner progress earns explorers their share of bytes") {
  Scheduler half(0.5);
  FakeLearner learner;
  learner.waiting = true;
  half.add_learner(&learner);
  half.learner_progressed(0);                              // a learner active just now
  half.explorer_moved(Scheduler::kBurstBytes / 2 + 1000);  // inserted bytes count double
  CHECK(half.explorer_must_wait());
  half.learner_progressed(1999);
  CHECK(half.explorer_must_wait());
  half.learner_progressed(1);
  CHECK_FALSE(half.explorer_must_wait());  // the same work for explorers as for learners

  Scheduler most(0.8);
  most.add_learner(&learner);
  most.learner_progressed(0);  // a learner active just now
  most.explorer_moved(Scheduler::kBurstBytes / 2 + 500);
  most.learner_progressed(3000);
  CHECK(most.explorer_must_wait());  // a quarter of the learners' work
  most.learner_progressed(1000);
  CHECK_FALSE(most.explorer_must_wait());
}

TEST_CASE("a share of 0 turns the policy off") {
  Scheduler off(0.0);
  FakeLearner learner;
  learner.waiting = true;
  off.add_learner(&learner);
  off.learner_progressed(0);  // a learner active just now
  off.explorer_moved(1 << 30);
  CHECK_FALSE(off.explorer_must_wait());
}

TEST_CASE_METHOD(ExplorersOverShare,
                 "an explorer over its share waits until the learner progresses") {
  const auto waited =
      turn(io, scheduler, [&] { scheduler.learner_progressed(2 * Scheduler::kBurstBytes); });
  CHECK(waited < Scheduler::kStallAfter);
  CHECK(scheduler.credit() > 0);
}

TEST_CASE("an explorer waits until the learner earns it credit or stops progressing") {
  asio::io_context io;
  Scheduler scheduler(0.5);
  FakeLearner learner;
  learner.waiting = true;
  scheduler.add_learner(&learner);
  scheduler.learner_progressed(0);  // a learner active just now
  scheduler.learner_progressed(1);
  scheduler.explorer_moved(Scheduler::kBurstBytes + 10);
  // The learner makes no more progress: the explorer goes on kStallAfter after its last.
  const auto waited = turn(io, scheduler);
  CHECK(waited >= Scheduler::kStallAfter - 1ms);
  CHECK(waited < 10 * Scheduler::kStallAfter);
  // Learners are busy on their own side now; explorers run freely.
  CHECK_FALSE(scheduler.explorer_must_wait());
  CHECK(turn(io, scheduler) < Scheduler::kStallAfter);
  // It progresses again: explorers wait again; their debt was bounded meanwhile.
  scheduler.explorer_moved(100 << 20);
  scheduler.learner_progressed(1);
  CHECK(scheduler.explorer_must_wait());
  // Progress that keeps coming but earns too little keeps the explorer waiting past
  // kStallAfter.
  const auto kept = turn(io, scheduler, [&] {
    for (int i = 0; i < 8; ++i) {
      std::this_thread::sleep_for(Scheduler::kStallAfter / 4);
      scheduler.learner_progressed(1);
      io.poll();
    }
    scheduler.learner_progressed(2 * Scheduler::kBurstBytes);
  });
  CHECK(kept >= 2 * Scheduler::kStallAfter - 1ms);
  CHECK_FALSE(scheduler.explorer_must_wait());
}

TEST_CASE("the time spent on requests counts as work, whatever their size") {
  Scheduler scheduler(0.5);
  FakeLearner learner;
  learner.waiting = true;
  scheduler.add_learner(&learner);
  scheduler.learner_progressed(0);
  // Tiny explorer requests (a step of compressed pixels) that take the thread 5 us each:
  // their 300 bytes alone would take 7,000 of them to use up the burst, their time 205.
  const auto request = std::chrono::microseconds(5);
  const std::int64_t cost = static_cast<std::int64_t>(Scheduler::bytes_of(request)) + 600;
  CHECK(Scheduler::bytes_of(request) == 5 * Scheduler::kBytesPerMicrosecond);
  std::int64_t handled = 0;
  while (!scheduler.explorer_must_wait()) {
    scheduler.explorer_moved(300);
    scheduler.explorer_worked(request);
    ++handled;
  }
  CHECK(handled == Scheduler::kBurstBytes / cost + 1);
  const std::int64_t before = scheduler.credit();
  scheduler.learner_worked(request);  // at share 0.5 as much work earns explorers as much
  CHECK(scheduler.credit() == before + static_cast<std::int64_t>(Scheduler::bytes_of(request)));
  scheduler.remove_learner(&learner);
}

TEST_CASE_METHOD(ExplorersOverShare,
                 "learner progress resumes waiting explorers one at a time, while credit is left") {
  // Three explorers wait; each spends 1,000 bytes of work once it goes on.
  int went_on = 0;
  for (int i = 0; i < 3; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await scheduler.explorer_turn();
          ++went_on;
          scheduler.explorer_moved(500);  // 500 inserted bytes: 1,000 of work
        },
        asio::detached);
  }
  io.poll();
  REQUIRE(went_on == 0);
  // Enough for one of them: one goes on; the next finds the credit spent and waits on.
  scheduler.learner_progressed(static_cast<std::uint64_t>(-scheduler.credit()) + 10);
  io.poll();
  CHECK(went_on == 1);
  // Enough for two more: both go on, the second woken by the first.
  scheduler.learner_progressed(static_cast<std::uint64_t>(-scheduler.credit()) + 1500);
  io.poll();
  CHECK(went_on == 3);
}
