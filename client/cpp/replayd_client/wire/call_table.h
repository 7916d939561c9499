// CallTable: the calls in flight on one connection. Each call sits in a slot whose index
// is part of its request id, so a reply finds its call in O(1) without allocating. Bounded:
// start() blocks while max_in_flight calls are outstanding (the replies free slots).
// Threading: every method is thread-safe (one mutex); futures are completed outside it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "replayd_client/error.h"
#include "replayd_client/wire/pending_call.h"

namespace replayd::client {

class CallTable {
 public:
  // At most 65536 calls in flight; 0 is taken as 1.
  static constexpr std::size_t kMaxInFlight = std::size_t{1} << 16;

  explicit CallTable(std::size_t max_in_flight);

  // Registers a new call decoded by `Decode`; returns its request id and the caller's
  // future. Blocks while max_in_flight calls are outstanding. Throws the closing error once
  // close() ran (nothing is registered then).
  template <typename T, Decoder<T> Decode>
  std::pair<std::uint64_t, std::future<T>> start() {
    std::unique_lock lock(mutex_);
    slot_freed_.wait(lock, [&] { return !free_.empty() || closed_; });
    if (closed_) throw *closed_;
    const std::uint32_t index = free_.back();
    free_.pop_back();
    Slot& slot = slots_[index];
    slot.id = (next_sequence_++ << kIndexBits) | index;
    return {slot.id, slot.call.arm<T, Decode>()};
  }

  // Completes the call with `reply.request_id` using `decoder`. Returns false (and does
  // nothing) if no call in flight has that id.
  bool complete(Reply&& reply, ReplyDecoder& decoder);

  // Fails every call in flight with `error`; every later start() throws it. Idempotent
  // (the first error wins).
  void close(const Error& error);

  std::size_t in_flight() const;

 private:
  static constexpr unsigned kIndexBits = 16;
  struct Slot {
    std::uint64_t id = 0;
    PendingCall call;
  };

  mutable std::mutex mutex_;
  std::condition_variable slot_freed_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;  // indexes of unused slots
  std::uint64_t next_sequence_ = 1;
  std::optional<Error> closed_;
};

}  // namespace replayd::client
