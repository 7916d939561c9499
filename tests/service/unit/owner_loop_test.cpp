// Tests of service/owner_loop.h: the owner thread's loop runs every handler with or without
// busy polling, polls a whole window before it sleeps (and then does sleep), wakes for work
// posted from another thread, counts its idle polling while traffic goes on, and returns
// when the io_context stops or runs out of work.
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "service/owner_loop.h"

using namespace replayd::service;
using namespace std::chrono_literals;

namespace {

// What the loop reported through its PolledIdle callback.
struct PolledTotals {
  int reports = 0;
  std::chrono::nanoseconds idle{};
  PolledIdle callback() {
    return [this](std::chrono::nanoseconds polled) {
      ++reports;
      idle += polled;
    };
  }
};

}  // namespace

TEST_CASE("without busy polling the loop runs every handler and returns once work runs out") {
  asio::io_context io;
  int ran = 0;
  for (int i = 0; i < 3; ++i)
    asio::post(io, [&ran] { ++ran; });
  PolledTotals totals;
  run_owner_loop(io, 0us, totals.callback());
  CHECK(ran == 3);
  CHECK(totals.reports == 0);
}

TEST_CASE("a busy-polling loop polls a whole window, then sleeps until the next timer") {
  asio::io_context io;
  bool posted_ran = false;
  bool timer_fired = false;
  asio::post(io, [&posted_ran] { posted_ran = true; });
  asio::steady_timer timer(io, 100ms);
  timer.async_wait([&timer_fired](const asio::error_code& ec) { timer_fired = !ec; });
  PolledTotals totals;
  const auto start = std::chrono::steady_clock::now();
  run_owner_loop(io, 500us, totals.callback());
  CHECK(posted_ran);
  CHECK(timer_fired);
  CHECK(std::chrono::steady_clock::now() - start >= 100ms);
  // At least one whole window polled before sleeping; but far less than the 100 ms waited
  // for the timer: the thread slept in the reactor instead of polling all along.
  CHECK(totals.idle >= 500us);
  CHECK(totals.idle < 50ms);
}

TEST_CASE("a busy-polling loop runs work posted from another thread and returns on stop") {
  asio::io_context io;
  auto guard = asio::make_work_guard(io);  // no work of its own: only the posts end it
  const std::thread::id loop_thread = std::this_thread::get_id();
  bool first_on_loop = false;
  bool second_on_loop = false;
  std::thread poster([&] {
    asio::post(io, [&] { first_on_loop = std::this_thread::get_id() == loop_thread; });
    std::this_thread::sleep_for(30ms);  // the loop has long gone to sleep by now
    asio::post(io, [&] { second_on_loop = std::this_thread::get_id() == loop_thread; });
    asio::post(io, [&io] { io.stop(); });
  });
  PolledTotals totals;
  run_owner_loop(io, 1ms, totals.callback());
  poster.join();
  CHECK(first_on_loop);
  CHECK(second_on_loop);
  CHECK(io.stopped());
}

TEST_CASE("steady traffic within the window has its idle polling counted as it goes") {
  asio::io_context io;
  asio::steady_timer timer(io);
  PolledTotals totals;
  int ticks = 0;
  int reports_before_last_tick = -1;
  // A tick every 200 us for 50 ticks: always within the 50 ms window, so the polling spell
  // lasts as long as the traffic does; the idle time between ticks is reported meanwhile.
  std::function<void(const asio::error_code&)> tick = [&](const asio::error_code& ec) {
    if (ec) return;
    if (++ticks == 50) {
      reports_before_last_tick = totals.reports;
      return;
    }
    timer.expires_after(200us);
    timer.async_wait(tick);
  };
  timer.expires_after(200us);
  timer.async_wait(tick);
  run_owner_loop(io, 50ms, totals.callback());
  CHECK(ticks == 50);
  CHECK(reports_before_last_tick > 10);
  CHECK(totals.idle > 0ns);
}
