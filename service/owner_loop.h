// The owner thread's loop: runs the io_context that owns every table until it stops,
// optionally polling it for a while before each sleep (busy_poll_us, docs/CONFIG.md).
// Threading: the calling thread becomes the io_context's only thread; it returns when the
// io_context stops (io_context::stop, or no work left).
#pragma once

#include <asio/io_context.hpp>
#include <chrono>
#include <functional>

namespace replayd::service {

// Told how long the thread polled with nothing to run, each time such a stretch ends (a
// handler ran, or the thread goes to sleep); called on the owner thread.
using PolledIdle = std::function<void(std::chrono::nanoseconds)>;

// Runs `io` until it stops. busy_poll == 0: io.run(), the thread sleeps in the reactor
// whenever nothing is ready. busy_poll > 0: once nothing is ready, the thread keeps
// polling (ready handlers, timers, the sockets without blocking) until `busy_poll` has
// passed since the last handler ran, and only then sleeps until the next event; any
// handler restarts the window. A request arriving within the window is read without the
// thread being woken: no wake-up for its sender to pay (a few us of the sender's CPU on a
// virtual machine) and no cold start for the thread (docs/OPERATIONS.md, "Busy polling",
// with the figures). The price: the thread's core stays busy for the window after every burst, even
// when no request follows. `on_polled_idle` (may be empty) is told each spell's idle time.
void run_owner_loop(asio::io_context& io, std::chrono::microseconds busy_poll,
                    const PolledIdle& on_polled_idle);

}  // namespace replayd::service
