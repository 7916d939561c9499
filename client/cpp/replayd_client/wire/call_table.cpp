#include "replayd_client/wire/call_table.h"

#include <algorithm>

namespace replayd::client {

CallTable::CallTable(std::size_t max_in_flight) {
  const std::size_t slots = std::clamp<std::size_t>(max_in_flight, 1, kMaxInFlight);
  slots_.resize(slots);
  free_.reserve(slots);
  for (std::size_t i = slots; i-- > 0;)
    free_.push_back(static_cast<std::uint32_t>(i));
}

bool CallTable::complete(Reply&& reply, ReplyDecoder& decoder) {
  PendingCall call;
  {
    std::lock_guard lock(mutex_);
    const std::size_t index = reply.request_id & ((std::uint64_t{1} << kIndexBits) - 1);
    if (index >= slots_.size()) return false;
    Slot& slot = slots_[index];
    if (!slot.call.armed() || slot.id != reply.request_id) return false;
    call = std::move(slot.call);
    slot.call = PendingCall();
    free_.push_back(static_cast<std::uint32_t>(index));
  }
  slot_freed_.notify_one();
  call.complete(std::move(reply), decoder);
  return true;
}

void CallTable::close(const Error& error) {
  std::vector<PendingCall> failed;
  {
    std::lock_guard lock(mutex_);
    if (!closed_) closed_ = error;
    for (std::size_t index = 0; index < slots_.size(); ++index) {
      Slot& slot = slots_[index];
      if (!slot.call.armed()) continue;
      failed.push_back(std::move(slot.call));
      slot.call = PendingCall();
      free_.push_back(static_cast<std::uint32_t>(index));
    }
  }
  slot_freed_.notify_all();
  const auto exception = std::make_exception_ptr(error);
  for (auto& call : failed)
    call.fail(exception);
}

std::size_t CallTable::in_flight() const {
  std::lock_guard lock(mutex_);
  return slots_.size() - free_.size();
}

}  // namespace replayd::client
