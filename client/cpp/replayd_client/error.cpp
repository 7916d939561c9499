#include "replayd_client/error.h"

#include <array>
#include <utility>

namespace replayd::client {
namespace {

constexpr std::array<std::pair<ErrorCode, std::string_view>, 13> kNames{{
    {ErrorCode::invalid_argument, "invalid_argument"},
    {ErrorCode::not_found, "not_found"},
    {ErrorCode::already_exists, "already_exists"},
    {ErrorCode::timeout, "timeout"},
    {ErrorCode::resource_exhausted, "resource_exhausted"},
    {ErrorCode::shutting_down, "shutting_down"},
    {ErrorCode::protocol_error, "protocol_error"},
    {ErrorCode::unauthenticated, "unauthenticated"},
    {ErrorCode::permission_denied, "permission_denied"},
    {ErrorCode::connection_lost, "connection_lost"},
    {ErrorCode::bad_reply, "bad_reply"},
    {ErrorCode::data_loss, "data_loss"},
    {ErrorCode::unknown, "unknown"},
}};

}  // namespace

std::string_view error_code_name(ErrorCode code) {
  for (const auto& [value, name] : kNames) {
    if (value == code) return name;
  }
  return "unknown";
}

ErrorCode parse_error_code(std::string_view name) {
  for (const auto& [value, spelling] : kNames) {
    if (spelling == name) return value;
  }
  return ErrorCode::unknown;
}

Error::Error(ErrorCode code, std::string message)
    : std::runtime_error(message + " [" + std::string(error_code_name(code)) + "]"),
      code_(code),
      message_(std::move(message)) {}

}  // namespace replayd::client
