// Tests of service/waiting/off_thread.h: work run on a thread of its own while the calling
// coroutine is suspended, its result back on the io_context thread; a bounded wait that
// gives up on slow work without waiting for it, and the io_context serving other handlers
// meanwhile.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <thread>

#include "service/waiting/off_thread.h"

using namespace replayd::service;
using namespace std::chrono_literals;

TEST_CASE("off-thread work returns its result to the coroutine on the io_context thread") {
  asio::io_context io;
  std::optional<int> got;
  std::thread::id resumed_on;
  std::thread::id worked_on;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        std::function<int()> work = [&worked_on] {
          worked_on = std::this_thread::get_id();
          return 42;
        };
        got = co_await run_off_thread(std::move(work));
        resumed_on = std::this_thread::get_id();
      },
      asio::detached);
  io.run();
  CHECK(got == 42);
  CHECK(resumed_on == std::this_thread::get_id());
  CHECK(worked_on != std::this_thread::get_id());
  wait_for_off_thread_work();
}

TEST_CASE("a bounded off-thread wait gives up on slow work while handlers keep running") {
  asio::io_context io;
  std::atomic<bool> release{false};
  std::optional<std::optional<int>> slow;
  std::optional<std::optional<int>> quick;
  int served = 0;
  const auto started = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration waited{};
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        std::function<int()> work = [&release] {
          while (!release.load())
            std::this_thread::sleep_for(1ms);
          return 1;
        };
        slow = co_await run_off_thread_for(std::move(work), 50ms);
        waited = std::chrono::steady_clock::now() - started;
        std::function<int()> fast = [] { return 7; };
        quick = co_await run_off_thread_for(std::move(fast), 10s);
      },
      asio::detached);
  asio::post(io, [&served] { ++served; });  // runs while the slow work is off the thread
  io.run();
  REQUIRE(slow.has_value());
  CHECK_FALSE(slow->has_value());  // gave up: the work is still running
  CHECK(waited >= 50ms);
  CHECK(served == 1);
  REQUIRE(quick.has_value());
  CHECK(*quick == 7);
  CHECK(off_thread_running().load() >= 1);  // the slow thread goes on past the wait
  release = true;
  wait_for_off_thread_work();
  CHECK(off_thread_running().load() == 0);
  io.restart();
  io.run();  // the late result's handler, posted meanwhile, runs and drops it
}
