// Parking: the requests of one connection that wait for admission (service/commands/
// admission.h), with the payload bytes they hold. The connection owns it; admission parks a
// request here for as long as it waits, so the connection can count its waiters against
// limits.max_waiting_per_connection and its budget, and cancel them when it closes.
// Threading: io_context thread only.
#pragma once

#include <cstddef>
#include <unordered_set>

#include "core/result.h"
#include "service/waiting/wait_queue.h"

namespace replayd::service {

class Parking {
 public:
  // The connection, as its parked requests see it.
  class Connection {
   public:
    // A request is about to suspend: whatever reads the connection's next requests must go
    // on without waiting for it.
    virtual void request_suspends() = 0;
    // Parked requests now hold `held` bytes more (parked) or fewer (!parked): their
    // payload plus kBytesPerParkedRequest each.
    virtual void parked_bytes_changed(std::size_t held, bool parked) = 0;

   protected:
    ~Connection() = default;
  };

  // What a parked request holds beside its payload: the coroutine frames of its reader,
  // dispatch (with the request's parsed metadata, docs/ARCHITECTURE.md) and handler, its
  // waiter and its frame's metadata text. Counted with the payload against the connection's
  // and the server's budgets (max_frame_bytes, max_buffered_bytes), so that many small
  // parked requests pause reading as a few large ones do. Measured (tests/python/
  // test_memory_budget.py): 6.4 KiB of resident memory per parked insert of a small item.
  static constexpr std::size_t kBytesPerParkedRequest = 8 * 1024;

  Parking(Connection& connection, std::size_t max_waiting)
      : connection_(connection), max_waiting_(max_waiting) {}
  Parking(const Parking&) = delete;
  Parking& operator=(const Parking&) = delete;

  // Parks `waiter`, holding `held_bytes` of payload, and tells the connection the request
  // suspends. resource_exhausted (nothing parked) when max_waiting requests wait already.
  Status enter(WaitQueue::Waiter& waiter, std::size_t held_bytes);
  // Unparks `waiter` (after enter()); idempotent per waiter is not required: call once.
  void leave(WaitQueue::Waiter& waiter, std::size_t held_bytes);
  // Ends every parked wait with `reason` (the connection closed).
  void cancel_all(CancelReason reason);

  bool empty() const { return waiters_.empty(); }
  std::size_t size() const { return waiters_.size(); }
  std::size_t held_bytes() const { return held_bytes_; }  // payloads and per-request bytes

 private:
  Connection& connection_;
  std::size_t max_waiting_;
  std::unordered_set<WaitQueue::Waiter*> waiters_;
  std::size_t held_bytes_ = 0;
};

}  // namespace replayd::service
