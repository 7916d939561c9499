#include "service/waiting/parking.h"

#include <string>

namespace replayd::service {

Status Parking::enter(WaitQueue::Waiter& waiter, std::size_t held_bytes) {
  if (waiters_.size() >= max_waiting_) {
    return make_error(ErrorCode::resource_exhausted,
                      "this connection already has max_waiting_per_connection = " +
                          std::to_string(max_waiting_) + " requests waiting");
  }
  waiters_.insert(&waiter);
  held_bytes_ += held_bytes + kBytesPerParkedRequest;
  connection_.parked_bytes_changed(held_bytes + kBytesPerParkedRequest, true);
  connection_.request_suspends();
  return Ok{};
}

void Parking::leave(WaitQueue::Waiter& waiter, std::size_t held_bytes) {
  waiters_.erase(&waiter);
  held_bytes_ -= held_bytes + kBytesPerParkedRequest;
  connection_.parked_bytes_changed(held_bytes + kBytesPerParkedRequest, false);
}

void Parking::cancel_all(CancelReason reason) {
  for (WaitQueue::Waiter* waiter : waiters_)
    waiter->cancel(reason);
}

}  // namespace replayd::service
