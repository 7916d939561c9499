#include "service/net/auth.h"

#include <algorithm>
#include <boost/json.hpp>
#include <span>

#include "service/commands/command_table.h"

namespace replayd::service {

bool tokens_equal(std::string_view expected, std::string_view given) {
  // Every byte of `expected` is compared against something, so the loop length leaks only the
  // configured token's length; the accumulated difference is inspected once at the end.
  unsigned difference = expected.size() == given.size() ? 0u : 1u;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const unsigned char offered = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    difference |= static_cast<unsigned char>(expected[i]) ^ offered;
  }
  return difference == 0;
}

std::optional<std::string> refuse_unauthenticated(std::string_view expected, std::string_view meta,
                                                  std::uint64_t payload_bytes) {
  boost::system::error_code ec;
  const boost::json::value document = boost::json::parse(meta, ec);
  const boost::json::object* request = ec ? nullptr : document.if_object();
  const boost::json::value* op = request ? request->if_contains("op") : nullptr;
  if (!op || !op->is_string() || op->get_string() != "hello") {
    return std::string(
        "this TCP listener requires a token: the first request must be hello with "
        "\"token\"; the connection is closed");
  }
  const boost::json::value* token = request->if_contains("token");
  if (!token || !token->is_string()) {
    return std::string(
        "hello carries no \"token\" (a string) and this TCP listener requires one; "
        "the connection is closed");
  }
  const std::span<const std::string_view> fields = find_command("hello")->fields;
  for (const auto& entry : *request) {
    const std::string_view key(entry.key().data(), entry.key().size());
    if (key != "op" && std::find(fields.begin(), fields.end(), key) == fields.end()) {
      std::string message = "hello before authentication takes only the keys \"op\"";
      for (const std::string_view field : fields)
        message += ", \"" + std::string(field) + "\"";
      return message + "; the connection is closed";
    }
  }
  if (payload_bytes != 0) {
    return std::string("hello before authentication carries no payload; the connection is closed");
  }
  const boost::json::string& given = token->get_string();
  if (!tokens_equal(expected, std::string_view(given.data(), given.size()))) {
    return std::string("wrong token; the connection is closed");
  }
  return std::nullopt;
}

}  // namespace replayd::service
