// Tests of service/scheduler.h: explorers wait for learners only while a learner waits for
// the server and explorers used up their share; never longer than kMaxYield.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

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

}  // namespace

TEST_CASE("explorers run freely while no learner waits for the server") {
  asio::io_context io;
  Scheduler scheduler(0.5);
  FakeLearner learner;
  scheduler.add_learner(&learner);
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
  half.explorer_moved(Scheduler::kBurstBytes / 2 + 1000);  // inserted bytes count double
  CHECK(half.explorer_must_wait());
  half.learner_progressed(1999);
  CHECK(half.explorer_must_wait());
  half.learner_progressed(1);
  CHECK_FALSE(half.explorer_must_wait());  // the same work for explorers as for learners

  Scheduler most(0.8);
  most.add_learner(&learner);
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
  off.explorer_moved(1 << 30);
  CHECK_FALSE(off.explorer_must_wait());
}

TEST_CASE("an explorer over its share waits until the learner progresses") {
  asio::io_context io;
  Scheduler scheduler(0.5);
  FakeLearner learner;
  learner.waiting = true;
  scheduler.add_learner(&learner);
  scheduler.explorer_moved(Scheduler::kBurstBytes + 10);
  const auto waited =
      turn(io, scheduler, [&] { scheduler.learner_progressed(2 * Scheduler::kBurstBytes); });
  CHECK(waited < Scheduler::kMaxYield);
  CHECK(scheduler.credit() > 0);
}

TEST_CASE("a learner that makes no progress holds explorers back for kMaxYield at most") {
  asio::io_context io;
  Scheduler scheduler(0.5);
  FakeLearner learner;
  learner.waiting = true;
  scheduler.add_learner(&learner);
  scheduler.explorer_moved(Scheduler::kBurstBytes + 10);
  const auto waited = turn(io, scheduler);
  CHECK(waited >= Scheduler::kMaxYield);
  CHECK(waited < 200ms);
  // Taken to be busy on its own side: explorers get a whole burst again.
  CHECK(scheduler.credit() == Scheduler::kBurstBytes);
  CHECK_FALSE(scheduler.explorer_must_wait());
}
