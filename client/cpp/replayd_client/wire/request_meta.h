// Request metadata text shared by the Client's operation files: a per-thread scratch string
// whose capacity is kept, so building a request allocates nothing once warm. The string is
// valid until the next call of scratch_meta() on the same thread; Connection::call writes it
// before returning, which is all the callers need.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "replayd_client/wire/json_text.h"

namespace replayd::client {

// The thread's scratch string, emptied.
inline std::string& scratch_meta() {
  thread_local std::string text;
  text.clear();
  return text;
}

// `{"op":"<op>","table":"<table>"` (unterminated) in the scratch string.
inline std::string& table_request(std::string_view op, std::string_view table) {
  std::string& meta = scratch_meta();
  meta.append("{\"op\":\"").append(op).append("\",\"table\":");
  append_json_string(meta, table);
  return meta;
}

// A plain sample's metadata (unterminated): table, n, beta, timeout_ms.
inline std::string& sample_request(std::string_view table, std::uint64_t n, double beta,
                                   const std::optional<std::uint64_t>& timeout_ms) {
  std::string& meta = table_request("sample", table);
  meta.append(",\"n\":");
  append_json_uint(meta, n);
  meta.append(",\"beta\":");
  append_json_double(meta, beta);
  meta.append(",\"timeout_ms\":");
  append_json_optional_uint(meta, timeout_ms);
  return meta;
}

// `,"staged":{"arena":A,"offset":O,"rows":R}`: the member of a request whose columns lie in
// staging arena A (docs/SHM.md, docs/PROTOCOL.md "insert").
inline void append_staged_member(std::string& meta, std::uint64_t arena, std::uint64_t offset,
                                 std::uint64_t rows) {
  meta.append(",\"staged\":{\"arena\":");
  append_json_uint(meta, arena);
  meta.append(",\"offset\":");
  append_json_uint(meta, offset);
  meta.append(",\"rows\":");
  append_json_uint(meta, rows);
  meta.push_back('}');
}

}  // namespace replayd::client
