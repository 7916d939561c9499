#include "replayd_client/address.h"

#include <charconv>

#include "replayd_client/error.h"

namespace replayd::client {
namespace {

constexpr std::string_view kUnixScheme = "unix://";
constexpr std::string_view kTcpScheme = "tcp://";

[[noreturn]] void reject(std::string_view text, std::string_view why) {
  throw Error(ErrorCode::invalid_argument,
              "address '" + std::string(text) + "': " + std::string(why));
}

}  // namespace

std::string Address::to_string() const {
  if (kind == Kind::unix_socket) return std::string(kUnixScheme) + path;
  const bool v6 = host.find(':') != std::string::npos;
  return std::string(kTcpScheme) + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Address parse_address(std::string_view text) {
  Address address;
  if (text.starts_with(kUnixScheme)) {
    address.kind = Address::Kind::unix_socket;
    address.path = std::string(text.substr(kUnixScheme.size()));
    if (address.path.empty()) reject(text, "missing socket path (expected unix:///path/to.sock)");
    return address;
  }
  if (!text.starts_with(kTcpScheme)) reject(text, "expected unix:///path or tcp://host:port");
  std::string_view rest = text.substr(kTcpScheme.size());
  while (rest.ends_with('/'))
    rest.remove_suffix(1);
  std::string_view host, port_text;
  if (rest.starts_with('[')) {
    const auto close = rest.find("]:");
    if (close == std::string_view::npos) reject(text, "expected tcp://[ipv6]:port");
    host = rest.substr(1, close - 1);
    port_text = rest.substr(close + 2);
  } else {
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) reject(text, "expected tcp://host:port");
    host = rest.substr(0, colon);
    port_text = rest.substr(colon + 1);
  }
  if (host.empty()) reject(text, "missing host (expected tcp://host:port)");
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port_text.empty()) {
    reject(text, "port '" + std::string(port_text) + "' is not a number");
  }
  if (port < 1 || port > 65535)
    reject(text, "port " + std::to_string(port) + " out of range 1..65535");
  address.kind = Address::Kind::tcp;
  address.host = std::string(host);
  address.port = static_cast<std::uint16_t>(port);
  return address;
}

}  // namespace replayd::client
