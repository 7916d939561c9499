// Keeps `depth` requests in flight: sends `depth`, then one more after each reply to one of
// them, until the warm-up and the timed window have passed; then drains. Counters reset
// when the warm-up ends, so only the timed window's replies count. `send()` issues one
// request; `receive()` handles one reply and returns what it delivered. A receive may send
// a request of its own (a re-ask) and call `extra()`; the reply to an extra request says so
// (Received::extra) and is not followed by a new regular request, so at most one extra
// request per regular one is ever in flight and the pipeline stays bounded.
#pragma once

#include <chrono>
#include <ctime>
#include <cstddef>
#include <cstdint>

#include "clients.h"

namespace replayd::shm_proto {

// CPU time this thread has used, in seconds (what a core paid, whoever else ran on it).
inline double thread_cpu_s() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

class BufferedReader;
// Sends stop and waits for its answer (so every earlier reply has been read).
void finish(int sock, BufferedReader& reader);

struct Received {
  std::uint64_t items = 0;
  bool extra = false;  // this reply answered a request sent through extra()
};

class Pipeline {
 public:
  explicit Pipeline(const ClientOptions& options) : options_(options) {}

  void extra() { ++in_flight_; }
  bool measuring() const { return measuring_; }

  template <class Send, class Receive>
  ClientResult run(ClientResult& counters, Send send, Receive receive) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    auto window_start = start;
    double window_cpu_s = thread_cpu_s();
    for (std::size_t i = 0; i < options_.depth; ++i, ++in_flight_) send();
    std::uint64_t total = 0;
    bool sending = true;
    while (in_flight_ > 0) {
      const Received received = receive();
      const std::uint64_t items = received.items;
      --in_flight_;
      total += items;
      counters.items += items;
      const auto now = Clock::now();
      if (!measuring_ && std::chrono::duration<double>(now - start).count() >= options_.warmup_s) {
        measuring_ = true;
        window_start = now;
        window_cpu_s = thread_cpu_s();
        counters = ClientResult{};
      }
      if (measuring_ && std::chrono::duration<double>(now - window_start).count() >= options_.measure_s)
        sending = false;
      if (sending && !received.extra) {
        send();
        ++in_flight_;
      }
    }
    counters.seconds = std::chrono::duration<double>(Clock::now() - window_start).count();
    counters.cpu_s = thread_cpu_s() - window_cpu_s;
    counters.items_total = total;
    return counters;
  }

 private:
  ClientOptions options_;
  std::size_t in_flight_ = 0;
  bool measuring_ = false;
};

}  // namespace replayd::shm_proto
