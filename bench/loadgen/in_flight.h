// Calls in flight of a load-generator worker: each one's future and send time, and finishing
// the oldest (its latency recorded, its error counted and the first one printed).
// Threading: owned by one worker's main thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <future>
#include <iostream>
#include <optional>

#include "replayd_client/error.h"
#include "workers.h"

namespace replayd::loadgen {

using Clock = std::chrono::steady_clock;

inline std::uint64_t elapsed_ns(Clock::time_point since) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count());
}

template <typename T>
struct InFlight {
  std::future<T> reply;
  Clock::time_point sent_at;
};

// Counts a failed request in `result`, printing the first failure's message.
inline void count_error(WorkerResult& result, const client::Error& e) {
  if (result.errors++ == 0) std::cerr << "replayd_loadgen: request failed: " << e.what() << "\n";
}

// Waits for the oldest call of `queue`, records its latency in `totals`; returns the value
// or nullopt after counting an error.
template <typename T>
std::optional<T> finish_oldest(std::deque<InFlight<T>>& queue, OpTotals& totals,
                               std::uint64_t items, WorkerResult& result) {
  InFlight<T> call = std::move(queue.front());
  queue.pop_front();
  try {
    T value = call.reply.get();
    totals.latency.record(elapsed_ns(call.sent_at));
    ++totals.calls;
    totals.items += items;
    return value;
  } catch (const client::Error& e) {
    count_error(result, e);
    return std::nullopt;
  }
}

}  // namespace replayd::loadgen
