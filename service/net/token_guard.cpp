#include "service/net/token_guard.h"

#include <algorithm>

#include "service/net/auth.h"

namespace replayd::service {

FrameLimits TokenGuard::frame_limits(const Limits& limits) const {
  if (pending_) {  // never more than an authenticated client may send
    const std::uint64_t bytes =
        std::min<std::uint64_t>(kHeaderBytes + limits.max_meta_bytes, limits.max_frame_bytes);
    return FrameLimits{bytes, limits.max_meta_bytes};
  }
  return FrameLimits{limits.max_frame_bytes, limits.max_meta_bytes};
}

std::optional<std::string> TokenGuard::check(const WireFrame& frame) {
  auto refusal = refuse_unauthenticated(token_, frame.meta, frame.header.payload_bytes);
  if (!refusal) pending_ = false;
  return refusal;
}

std::string_view TokenGuard::too_large_message() {
  return "this TCP listener requires a token: the first request must be hello with \"token\" "
         "and no payload; the connection is closed";
}

}  // namespace replayd::service
