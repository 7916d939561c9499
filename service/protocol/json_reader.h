// JsonReader: strict, error-naming access to one JSON object (Boost.JSON). Every getter
// records the key as known; finish() then rejects any key nobody asked for. Errors name the
// full path ("tables[0].rate_limiter.kind") and what was expected.
// Not thread-safe; short-lived, on the stack of the parsing function. It reads every request's
// metadata: asking for a key allocates nothing.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace replayd::service {

class JsonReader {
 public:
  // `path` prefixes every error message; empty for the top level.
  JsonReader(const boost::json::object& object, std::string path)
      : object_(object), path_(std::move(path)) {}

  // Creates a reader for `value` if it is an object, else an error naming `path`.
  static Result<JsonReader> of(const boost::json::value& value, const std::string& path);

  bool has(std::string_view key) const;
  Result<std::string> string(std::string_view key);
  Result<std::optional<std::string>> optional_string(std::string_view key);
  Result<std::uint64_t> uint(std::string_view key);
  Result<std::uint64_t> uint_or(std::string_view key, std::uint64_t fallback);
  Result<std::optional<std::uint64_t>> optional_uint(std::string_view key);
  Result<double> number(std::string_view key);
  Result<double> number_or(std::string_view key, double fallback);
  // A number, or null meaning `when_null` (used for unbounded limits).
  Result<double> number_or_null(std::string_view key, double when_null, double fallback);
  Result<bool> boolean_or(std::string_view key, bool fallback);
  // The raw value; marks the key known. nullptr when absent.
  const boost::json::value* value(std::string_view key);

  // invalid_argument naming the first key that no getter asked for.
  Status finish() const;

  std::string path_of(std::string_view key) const;
  Error error(std::string_view key, const std::string& what) const;

 private:
  // Records that a getter asked for the object's entry at `position`.
  void mark_known(std::size_t position);
  bool is_known(std::size_t position) const;

  const boost::json::object& object_;
  std::string path_;
  // The entries a getter asked for, by position in object_: the first 64 in a mask, the rest
  // (only configs have more) in a vector.
  std::uint64_t known_first_ = 0;
  std::vector<bool> known_rest_;
};

// Parses `text` as one JSON value; invalid_argument with Boost.JSON's reason on failure.
// The value's storage comes from `storage` (the default heap resource unless given; a given
// resource must outlive the value and every copy of it).
Result<boost::json::value> parse_json(std::string_view text, const std::string& what,
                                      boost::json::storage_ptr storage = {});

// Reads a JSON number (int64, uint64 or double) as a double; nullopt if not a number.
std::optional<double> as_double(const boost::json::value& value);
// Reads a non-negative JSON integer (or an integral double); nullopt otherwise.
std::optional<std::uint64_t> as_uint(const boost::json::value& value);

}  // namespace replayd::service
