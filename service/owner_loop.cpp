#include "service/owner_loop.h"

namespace replayd::service {

void run_owner_loop(asio::io_context& io, std::chrono::microseconds busy_poll,
                    const PolledIdle& on_polled_idle) {
  if (busy_poll <= std::chrono::microseconds::zero()) {
    io.run();
    return;
  }
  using Clock = std::chrono::steady_clock;
  const auto report = [&](Clock::duration& idle) {
    if (on_polled_idle && idle > Clock::duration::zero()) {
      on_polled_idle(std::chrono::duration_cast<std::chrono::nanoseconds>(idle));
    }
    idle = {};
  };
  while (!io.stopped()) {
    // A polling spell: poll() runs every ready handler, timers included, and looks at the
    // sockets with a zero timeout. It ends `busy_poll` after the last handler ran.
    Clock::time_point last = Clock::now();
    Clock::time_point idle_since = last;
    Clock::duration idle{};
    for (;;) {
      const std::size_t ran = io.poll();
      const Clock::time_point now = Clock::now();
      if (ran > 0) {
        idle_since = now;
        report(idle);  // steady traffic never ends a spell: count its idle time as it goes
      } else {
        idle += now - last;
      }
      last = now;
      if (io.stopped() || now - idle_since >= busy_poll) break;
    }
    report(idle);
    // Sleep in the reactor until the next event and run its handler; then poll again.
    if (io.stopped() || io.run_one() == 0) break;  // stopped, or no work left
  }
}

}  // namespace replayd::service
