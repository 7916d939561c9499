#include "service/protocol/json_reader.h"

#include <cmath>

namespace replayd::service {

namespace json = boost::json;

std::optional<double> as_double(const json::value& value) {
  if (value.is_double()) return value.get_double();
  if (value.is_int64()) return static_cast<double>(value.get_int64());
  if (value.is_uint64()) return static_cast<double>(value.get_uint64());
  return std::nullopt;
}

std::optional<std::uint64_t> as_uint(const json::value& value) {
  if (value.is_uint64()) return value.get_uint64();
  if (value.is_int64()) {
    if (value.get_int64() < 0) return std::nullopt;
    return static_cast<std::uint64_t>(value.get_int64());
  }
  if (value.is_double()) {
    const double d = value.get_double();
    if (d >= 0 && d < 18446744073709551616.0 && std::floor(d) == d) {
      return static_cast<std::uint64_t>(d);
    }
  }
  return std::nullopt;
}

Result<json::value> parse_json(std::string_view text, const std::string& what,
                               json::storage_ptr storage) {
  boost::system::error_code ec;
  json::value value = json::parse(text, ec, std::move(storage));
  if (ec)
    return make_error(ErrorCode::invalid_argument, what + " is not valid JSON: " + ec.message());
  return value;
}

Result<JsonReader> JsonReader::of(const json::value& value, const std::string& path) {
  if (!value.is_object()) {
    return make_error(ErrorCode::invalid_argument,
                      (path.empty() ? std::string("the document") : path) + ": expected an object");
  }
  return JsonReader(value.get_object(), path);
}

std::string JsonReader::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

Error JsonReader::error(std::string_view key, const std::string& what) const {
  return make_error(ErrorCode::invalid_argument, path_of(key) + ": " + what);
}

bool JsonReader::has(std::string_view key) const {
  return object_.if_contains(key) != nullptr;
}

const json::value* JsonReader::value(std::string_view key) {
  const auto entry = object_.find(key);
  if (entry == object_.end()) return nullptr;
  mark_known(static_cast<std::size_t>(entry - object_.begin()));
  return &entry->value();
}

void JsonReader::mark_known(std::size_t position) {
  if (position < 64) {
    known_first_ |= std::uint64_t{1} << position;
    return;
  }
  if (known_rest_.size() <= position - 64) known_rest_.resize(position - 63);
  known_rest_[position - 64] = true;
}

bool JsonReader::is_known(std::size_t position) const {
  if (position < 64) return (known_first_ >> position) & 1;
  return position - 64 < known_rest_.size() && known_rest_[position - 64];
}

Result<std::optional<std::string>> JsonReader::optional_string(std::string_view key) {
  const json::value* v = value(key);
  if (!v || v->is_null()) return std::optional<std::string>();
  if (!v->is_string()) return error(key, "expected a string");
  return std::optional<std::string>(std::string(v->get_string()));
}

Result<std::string> JsonReader::string(std::string_view key) {
  auto s = optional_string(key);
  if (!s) return s.error();
  if (!*s) return error(key, "is required");
  return std::move(**s);
}

Result<std::optional<std::uint64_t>> JsonReader::optional_uint(std::string_view key) {
  const json::value* v = value(key);
  if (!v || v->is_null()) return std::optional<std::uint64_t>();
  auto n = as_uint(*v);
  if (!n) return error(key, "expected a non-negative integer");
  return std::optional<std::uint64_t>(*n);
}

Result<std::uint64_t> JsonReader::uint(std::string_view key) {
  auto n = optional_uint(key);
  if (!n) return n.error();
  if (!*n) return error(key, "is required");
  return **n;
}

Result<std::uint64_t> JsonReader::uint_or(std::string_view key, std::uint64_t fallback) {
  auto n = optional_uint(key);
  if (!n) return n.error();
  return n->value_or(fallback);
}

Result<double> JsonReader::number_or_null(std::string_view key, double when_null, double fallback) {
  const json::value* v = value(key);
  if (!v) return fallback;
  if (v->is_null()) return when_null;
  auto d = as_double(*v);
  if (!d) return error(key, "expected a number");
  return *d;
}

Result<double> JsonReader::number_or(std::string_view key, double fallback) {
  const json::value* v = value(key);
  if (!v || v->is_null()) return fallback;
  auto d = as_double(*v);
  if (!d) return error(key, "expected a number");
  return *d;
}

Result<double> JsonReader::number(std::string_view key) {
  const json::value* v = value(key);
  if (!v || v->is_null()) return error(key, "is required");  // as uint() and string()
  return number_or(key, 0.0);
}

Result<bool> JsonReader::boolean_or(std::string_view key, bool fallback) {
  const json::value* v = value(key);
  if (!v || v->is_null()) return fallback;
  if (!v->is_bool()) return error(key, "expected true or false");
  return v->get_bool();
}

Status JsonReader::finish() const {
  std::size_t position = 0;
  for (const auto& [key, _] : object_) {
    if (!is_known(position++)) return error(key, "unknown key");
  }
  return Ok{};
}

}  // namespace replayd::service
