// Helpers that append JSON text to a string without building a JSON document, for request
// metadata on the hot path. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace replayd::client {

// Appends `text` as a JSON string literal (quotes, escapes for '"', '\\' and control bytes).
void append_json_string(std::string& out, std::string_view text);
void append_json_uint(std::string& out, std::uint64_t value);
// Appends the value, or null when absent.
void append_json_optional_uint(std::string& out, std::optional<std::uint64_t> value);
// Appends a finite double in shortest round-trip form. The caller checks finiteness.
void append_json_double(std::string& out, double value);

}  // namespace replayd::client
