// Replies as they go on the wire, and the one place where engine errors become wire error
// codes (docs/PROTOCOL.md, "Requests and replies").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"
#include "service/byte_buffer.h"
#include "service/frame.h"

namespace replayd::service {

enum class WireError {
  invalid_argument,
  not_found,
  already_exists,
  timeout,
  resource_exhausted,
  shutting_down,
  protocol_error,
  unauthenticated
};

const char* wire_error_name(WireError code);
// Maps an engine error to its wire code. would_block only reaches the wire when a request
// asked not to wait (timeout_ms 0), so it maps to timeout.
WireError wire_error_of(ErrorCode code);

// One reply frame, owned: header bytes, JSON metadata and payload.
struct Reply {
  std::uint64_t request_id = 0;
  std::array<std::byte, kHeaderBytes> header{};
  std::string meta;
  ByteBuffer payload;
  bool is_error = false;
  std::string_view error_code;  // static string; empty unless is_error

  std::size_t wire_bytes() const { return kHeaderBytes + meta.size() + payload.size(); }
};

Reply make_reply(std::uint64_t request_id, std::string meta, ByteBuffer payload = {});
Reply make_error_reply(std::uint64_t request_id, WireError code, std::string_view message);
Reply make_error_reply(std::uint64_t request_id, const Error& error);

}  // namespace replayd::service
