// Server addresses: "unix:///path/to.sock" or "tcp://host:port" (IPv6 as "tcp://[::1]:7700").
// Pure parsing, no sockets, no state; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace replayd::client {

inline constexpr std::string_view kDefaultAddress = "unix:///tmp/replayd.sock";

struct Address {
  enum class Kind { unix_socket, tcp };
  Kind kind = Kind::unix_socket;
  std::string path;        // unix only
  std::string host;        // tcp only; without brackets for IPv6
  std::uint16_t port = 0;  // tcp only, 1..65535

  // The canonical spelling, which parse_address() accepts again.
  std::string to_string() const;
};

// Parses an address. Throws Error(invalid_argument) naming the problem. O(length).
Address parse_address(std::string_view text);

}  // namespace replayd::client
