// Tests of service/protocol/json_reader.h: strict reading of one JSON object, where every
// getter marks its key as known, finish() refuses keys nobody asked for, and every error
// names the full path of the key and what was expected.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "service/protocol/json_reader.h"

using namespace replayd;
using namespace replayd::service;
using Catch::Contains;

namespace {

namespace json = boost::json;

json::value parsed(std::string_view text) {
  auto value = parse_json(text, "test");
  REQUIRE(value);
  return std::move(value).value();
}

std::string message_of(const Error& error) {
  CHECK(error.code == ErrorCode::invalid_argument);
  return error.message;
}

}  // namespace

TEST_CASE("parse_json reads a JSON document and names what is not JSON") {
  CHECK(parse_json(R"({"a": [1, 2]})", "meta").ok());
  auto bad = parse_json("{\"a\": ", "the request metadata");
  REQUIRE_FALSE(bad);
  CHECK_THAT(message_of(bad.error()), Contains("the request metadata is not valid JSON"));
  CHECK_FALSE(parse_json("", "meta"));
  CHECK_FALSE(parse_json("{} trailing", "meta"));
}

TEST_CASE("a reader is made only of a JSON object, and the error names the path") {
  CHECK(JsonReader::of(parsed("{}"), "").ok());
  auto top = JsonReader::of(parsed("[1]"), "");
  REQUIRE_FALSE(top);
  CHECK_THAT(message_of(top.error()), Contains("the document: expected an object"));
  auto nested = JsonReader::of(parsed("3"), "tables[2].rate_limiter");
  REQUIRE_FALSE(nested);
  CHECK_THAT(message_of(nested.error()), Contains("tables[2].rate_limiter: expected an object"));
}

TEST_CASE("required strings and integers are read, and a missing one is named as required") {
  const auto doc = parsed(R"({"name": "replay", "capacity": 1000})");
  JsonReader reader(doc.get_object(), "tables[0]");
  CHECK(reader.string("name").value() == "replay");
  CHECK(reader.uint("capacity").value() == 1000);
  auto missing_string = reader.string("kind");
  REQUIRE_FALSE(missing_string);
  CHECK(message_of(missing_string.error()) == "tables[0].kind: is required");
  auto missing_uint = reader.uint("seed");
  REQUIRE_FALSE(missing_uint);
  CHECK(message_of(missing_uint.error()) == "tables[0].seed: is required");
  auto missing_number = reader.number("spi");
  REQUIRE_FALSE(missing_number);
  CHECK(message_of(missing_number.error()) == "tables[0].spi: is required");
  CHECK(reader.finish().ok());
}

TEST_CASE("a value of the wrong type is refused with what was expected") {
  const auto doc = parsed(R"({"s": 1, "u": "7", "n": "1.5", "b": 1, "neg": -3, "frac": 2.5})");
  JsonReader reader(doc.get_object(), "");
  CHECK(message_of(reader.string("s").error()) == "s: expected a string");
  CHECK(message_of(reader.uint("u").error()) == "u: expected a non-negative integer");
  CHECK(message_of(reader.number("n").error()) == "n: expected a number");
  CHECK(message_of(reader.boolean_or("b", false).error()) == "b: expected true or false");
  CHECK(message_of(reader.uint("neg").error()) == "neg: expected a non-negative integer");
  CHECK(message_of(reader.uint_or("frac", 0).error()) == "frac: expected a non-negative integer");
}

TEST_CASE("optional getters give their fallback when a key is absent or null") {
  const auto doc = parsed(R"({"s": null, "u": null, "n": null, "b": null})");
  JsonReader reader(doc.get_object(), "");
  CHECK_FALSE(reader.optional_string("s").value().has_value());
  CHECK_FALSE(reader.optional_string("absent").value().has_value());
  CHECK_FALSE(reader.optional_uint("u").value().has_value());
  CHECK(reader.uint_or("u", 9).value() == 9);
  CHECK(reader.uint_or("absent_u", 4).value() == 4);
  CHECK(reader.number_or("n", 0.5).value() == 0.5);
  CHECK(reader.number_or("absent_n", 1.5).value() == 1.5);
  CHECK(reader.boolean_or("b", true).value() == true);
  CHECK(reader.boolean_or("absent_b", false).value() == false);
  CHECK(reader.finish().ok());
}

TEST_CASE("number_or_null tells an absent key from an explicit null") {
  const auto doc = parsed(R"({"max_diff": null, "min_diff": -4, "bad": true})");
  JsonReader reader(doc.get_object(), "rate_limiter");
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(reader.number_or_null("max_diff", inf, 1.0).value() == inf);
  CHECK(reader.number_or_null("min_diff", -inf, 0.0).value() == -4.0);
  CHECK(reader.number_or_null("absent", inf, 2.0).value() == 2.0);
  auto bad = reader.number_or_null("bad", inf, 0.0);
  REQUIRE_FALSE(bad);
  CHECK(message_of(bad.error()) == "rate_limiter.bad: expected a number");
}

TEST_CASE("integers and integral doubles read as unsigned, up to 2^64 - 1") {
  const auto doc = parsed(
      R"({"max": 18446744073709551615, "zero": 0, "whole": 3.0, "big": 1e19, "over": 2e19})");
  JsonReader reader(doc.get_object(), "");
  CHECK(reader.uint("max").value() == UINT64_MAX);
  CHECK(reader.uint("zero").value() == 0);
  CHECK(reader.uint("whole").value() == 3);
  CHECK(reader.uint("big").value() == 10000000000000000000ull);
  CHECK_FALSE(reader.uint("over"));
  CHECK(as_uint(json::value(-1)) == std::nullopt);
  CHECK(as_uint(json::value(0.5)) == std::nullopt);
  CHECK(as_uint(json::value(std::nan(""))) == std::nullopt);
  CHECK(as_uint(json::value("1")) == std::nullopt);
}

TEST_CASE("numbers read as doubles from integers of either sign and from doubles") {
  CHECK(as_double(json::value(-7)) == -7.0);
  CHECK(as_double(json::value(std::uint64_t{1} << 63)) == 9223372036854775808.0);
  CHECK(as_double(json::value(0.25)) == 0.25);
  CHECK(as_double(json::value(true)) == std::nullopt);
  CHECK(as_double(json::value(nullptr)) == std::nullopt);
  const auto doc = parsed(R"({"gamma": 1, "alpha": 0.6})");
  JsonReader reader(doc.get_object(), "");
  CHECK(reader.number("gamma").value() == 1.0);
  CHECK(reader.number("alpha").value() == 0.6);
}

TEST_CASE("finish names the first key that no getter asked for") {
  const auto doc = parsed(R"({"name": "t", "capacty": 10})");
  JsonReader reader(doc.get_object(), "tables[1]");
  REQUIRE(reader.string("name"));
  auto status = reader.finish();
  REQUIRE_FALSE(status);
  CHECK(message_of(status.error()) == "tables[1].capacty: unknown key");
}

TEST_CASE("asking for a key marks it known even when it is absent or of the wrong type") {
  const auto doc = parsed(R"({"kind": 5, "extra": {"x": 1}})");
  JsonReader reader(doc.get_object(), "");
  CHECK_FALSE(reader.string("kind"));
  CHECK(reader.has("extra"));
  CHECK_FALSE(reader.has("missing"));
  CHECK_FALSE(reader.finish());  // has() does not mark a key known
  const json::value* extra = reader.value("extra");
  REQUIRE(extra != nullptr);
  CHECK(extra->is_object());
  CHECK(reader.value("missing") == nullptr);
  CHECK(reader.finish().ok());
}

TEST_CASE("paths join with dots, and the top level has no prefix") {
  const auto doc = parsed("{}");
  JsonReader top(doc.get_object(), "");
  CHECK(top.path_of("limits") == "limits");
  JsonReader nested(doc.get_object(), "tables[0].episodes");
  CHECK(nested.path_of("gamma") == "tables[0].episodes.gamma");
  const Error error = nested.error("gamma", "must be in [0, 1]");
  CHECK(error.code == ErrorCode::invalid_argument);
  CHECK(error.message == "tables[0].episodes.gamma: must be in [0, 1]");
}

TEST_CASE("a required number given as null is refused as required, as integers and strings are") {
  const auto doc = parsed(R"({"error_buffer": null, "capacity": null})");
  JsonReader reader(doc.get_object(), "rate_limiter");
  auto capacity = reader.uint("capacity");
  REQUIRE_FALSE(capacity);
  CHECK(message_of(capacity.error()) == "rate_limiter.capacity: is required");
  auto error_buffer = reader.number("error_buffer");
  INFO((error_buffer ? "read as " + std::to_string(*error_buffer) : std::string()));
  REQUIRE_FALSE(error_buffer);
  CHECK(message_of(error_buffer.error()) == "rate_limiter.error_buffer: is required");
}
