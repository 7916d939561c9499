// Access control for TCP connections: the shared token a client presents in its first
// request (`hello` with "token"), checked in constant time. Pure functions over the request
// metadata; the Session decides when to call them and closes the connection on refusal.
// Threading: none (no state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace replayd::service {

// Longest token accepted in the configuration (bytes).
inline constexpr std::size_t kMaxTokenBytes = 1024;

// Whether `given` equals `expected`. The time taken depends only on expected.size(), never on
// where the strings differ or on given.size(). Cost: O(expected.size()).
bool tokens_equal(std::string_view expected, std::string_view given);

// Checks the first request of a connection that must authenticate: its metadata `meta` must
// be a JSON object with "op": "hello", "token" equal to `expected`, no key hello does not
// take (its fields in the command table), and the frame must carry no payload
// (`payload_bytes` 0). Returns nullopt when it is, else the message of the `unauthenticated`
// error (which never echoes either token nor the stranger's keys).
// Cost: one JSON parse of `meta` (bounded by max_meta_bytes).
std::optional<std::string> refuse_unauthenticated(std::string_view expected, std::string_view meta,
                                                  std::uint64_t payload_bytes = 0);

}  // namespace replayd::service
