// TokenGuard: whether a connection has yet to authenticate (docs/SECURITY.md). A connection
// that must present the server's token may send only a small first request (no payload is
// allocated for a stranger), which must be hello with the token; until then the guard says
// which frame limits apply. The decision itself is auth.h's refuse_unauthenticated.
// Threading: io_context thread only.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "service/config.h"
#include "service/protocol/wire_frame.h"

namespace replayd::service {

class TokenGuard {
 public:
  // Before the first request: the connection must authenticate with `token`.
  void require(std::string_view token) {
    token_ = std::string(token);
    pending_ = true;
  }
  // The first request is still to be checked.
  bool pending() const { return pending_; }
  // The frame limits that apply now: header + max_meta_bytes while pending.
  FrameLimits frame_limits(const Limits& limits) const;
  // Checks the first request: nullopt when it is hello with the token (the guard is then
  // done), else the message of the `unauthenticated` error.
  std::optional<std::string> check(const WireFrame& frame);
  // The error message for a first request too large to be hello.
  static std::string_view too_large_message();

 private:
  std::string token_;
  bool pending_ = false;
};

}  // namespace replayd::service
