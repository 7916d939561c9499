// RequestOp: the operations of docs/PROTOCOL.md as a small enum, so the request path can
// label its metrics by array index instead of by string. Names match the wire op names.
// Pure functions, no state; any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace replayd::metrics {

enum class RequestOp : std::uint8_t {
  hello,
  ping,
  info,
  list_tables,
  create_table,
  drop_table,
  reset_table,
  insert,
  sample,
  update_priorities,
  delete_keys,
  snapshot,
  unknown,  // the request named no op, an unknown op, or its metadata was not JSON
};

inline constexpr std::size_t kRequestOpCount = static_cast<std::size_t>(RequestOp::unknown) + 1;

// The wire name ("delete" for delete_keys, "unknown" for unknown). O(1).
constexpr std::string_view request_op_name(RequestOp op) {
  constexpr std::array<std::string_view, kRequestOpCount> kNames{
      "hello",      "ping",        "info",   "list_tables", "create_table",
      "drop_table", "reset_table", "insert", "sample",      "update_priorities",
      "delete",     "snapshot",    "unknown"};
  return kNames[static_cast<std::size_t>(op)];
}

// The op named `name`, or RequestOp::unknown (so a client cannot grow the label set).
// O(number of ops).
constexpr RequestOp request_op_of(std::string_view name) {
  for (std::size_t i = 0; i + 1 < kRequestOpCount; ++i) {
    if (request_op_name(static_cast<RequestOp>(i)) == name) return static_cast<RequestOp>(i);
  }
  return RequestOp::unknown;
}

}  // namespace replayd::metrics
