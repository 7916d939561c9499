// Tests of service/protocol/column_decoding.h: a request's column list is checked against the
// table's fields (name, order, dtype, [n] + shape, compression) with errors naming the column;
// the payload columns each field takes; and the rows' values viewed in a payload, compressed
// frames found by their sizes.
#include <catch2/catch.hpp>
#include <cstring>

#include "service/protocol/column_decoding.h"

using namespace replayd;
using namespace replayd::service::commands;
using Catch::Contains;

namespace {

namespace json = boost::json;

std::unique_ptr<Table> episodic_table() {
  TableConfig config;
  config.name = "pong";
  Field obs{"obs", DType::float32, {2}};
  obs.next_of = true;
  Field pixels{"pixels", DType::uint8, {4, 4}};
  pixels.compression = Compression::zstd;
  config.schema = Schema::create({obs, Field{"rew", DType::float32, {}}, pixels}).value();
  config.capacity = 16;
  config.episodes.enabled = true;
  config.episodes.bootstrap_fields = {};
  auto table = Table::create(config);
  INFO((table ? std::string() : table.error().message));
  REQUIRE(table);
  return std::move(table).value();
}

json::array columns_of(std::string_view text) {
  return json::parse(text).as_array();
}

constexpr std::string_view kGood = R"([
  {"name": "obs", "dtype": "float32", "shape": [3, 2]},
  {"name": "rew", "dtype": "float32", "shape": [3]},
  {"name": "pixels", "dtype": "uint8", "shape": [3, 4, 4], "compression": "zstd", "bytes": 50}
])";

const std::vector<std::size_t> kAllFields{0, 1, 2};

std::string refusal(const Table& table, std::string_view text, std::uint64_t rows = 3) {
  std::vector<std::uint64_t> bytes;
  auto decoded = decode_columns(columns_of(text), kAllFields, table, rows, bytes);
  REQUIRE_FALSE(decoded);
  CHECK(decoded.error().code == ErrorCode::invalid_argument);
  return decoded.error().message;
}

// kGood with `from` replaced by `to` once.
std::string good_with(std::string_view from, std::string_view to) {
  std::string text(kGood);
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("a matching column list gives one payload column per field, two when compressed") {
  auto table = episodic_table();
  std::vector<std::uint64_t> bytes{99};  // appended to, not replaced
  auto encodings = decode_columns(columns_of(kGood), kAllFields, *table, 3, bytes);
  INFO((encodings ? std::string() : encodings.error().message));
  REQUIRE(encodings);
  REQUIRE(encodings->size() == 3);
  CHECK((*encodings)[0].field == 0);
  CHECK_FALSE((*encodings)[0].compressed);
  CHECK((*encodings)[2].compressed);
  CHECK((*encodings)[2].frame_bytes == 50);
  CHECK(bytes == std::vector<std::uint64_t>{99, 3 * 8, 3 * 4, 3 * 4, 50});
}

TEST_CASE("a subset of fields, such as the next_of ones, is checked in their order") {
  auto table = episodic_table();
  CHECK(next_of_fields(table->schema()) == std::vector<std::size_t>{0});
  std::vector<std::uint64_t> bytes;
  const std::vector<std::size_t> fields{0};
  auto encodings =
      decode_columns(columns_of(R"([{"name": "obs", "dtype": "float32", "shape": [1, 2]}])"),
                     fields, *table, 1, bytes);
  REQUIRE(encodings);
  CHECK(bytes == std::vector<std::uint64_t>{8});
}

TEST_CASE("a column out of the table's order is refused naming both names") {
  auto table = episodic_table();
  const auto message = refusal(*table, R"([
    {"name": "rew", "dtype": "float32", "shape": [3]},
    {"name": "obs", "dtype": "float32", "shape": [3, 2]},
    {"name": "pixels", "dtype": "uint8", "shape": [3, 4, 4], "compression": "zstd", "bytes": 1}
  ])");
  CHECK_THAT(message, Contains("table 'pong': columns[0]") && Contains("column 'rew'") &&
                          Contains("is 'obs'") && Contains("in the table's order"));
}

TEST_CASE("a column that is not an object or has no name is refused") {
  auto table = episodic_table();
  CHECK_THAT(
      refusal(*table, good_with(R"({"name": "obs", "dtype": "float32", "shape": [3, 2]})", "7")),
      Contains("columns[0]: expected an object"));
  CHECK_THAT(refusal(*table, good_with(R"("name": "obs", )", "")),
             Contains("columns[0].name: is required"));
}

TEST_CASE("a column of another dtype is refused with both dtypes") {
  auto table = episodic_table();
  CHECK_THAT(refusal(*table, good_with(R"("dtype": "float32", "shape": [3])",
                                       R"("dtype": "float64", "shape": [3])")),
             Contains("field 'rew': dtype float64 does not match the table's float32"));
}

TEST_CASE("a column shape other than [n] + the field's shape is refused with the expected one") {
  auto table = episodic_table();
  CHECK_THAT(refusal(*table, good_with(R"("shape": [3, 2])", R"("shape": [3, 3])")),
             Contains("field 'obs': shape [3,3] does not match [3,2]"));
  CHECK_THAT(refusal(*table, good_with(R"("shape": [3, 2])", R"("shape": [2, 2])")),
             Contains("field 'obs'") && Contains("[3,2]"));
  CHECK_THAT(refusal(*table, good_with(R"("shape": [3, 2])", R"("shape": [6])")),
             Contains("field 'obs': shape must be [3,2]"));
  CHECK_THAT(refusal(*table, good_with(R"(, "shape": [3, 2])", "")),
             Contains("field 'obs': shape must be [3,2]"));
  CHECK_THAT(refusal(*table, good_with(R"("shape": [3])", R"("shape": "3")")),
             Contains("field 'rew': shape must be [3]"));
  CHECK_THAT(refusal(*table, good_with(R"("shape": [3, 2])", R"("shape": [3, -2])")),
             Contains("field 'obs'"));
}

TEST_CASE("a compressed field's column must say zstd and give the frames' total bytes") {
  auto table = episodic_table();
  CHECK_THAT(refusal(*table, good_with(R"("compression": "zstd", )", "")),
             Contains("field 'pixels' is compressed") && Contains("\"zstd\""));
  CHECK_THAT(refusal(*table, good_with(R"("compression": "zstd")", R"("compression": "lz4")")),
             Contains("field 'pixels' is compressed"));
  CHECK_THAT(refusal(*table, good_with(R"(, "bytes": 50)", "")),
             Contains("columns[2].bytes: is required"));
  CHECK_THAT(refusal(*table, good_with(R"("bytes": 50)", R"("bytes": -1)")),
             Contains("columns[2].bytes"));
}

TEST_CASE("a column with a key the field does not take is refused naming the key") {
  auto table = episodic_table();
  CHECK_THAT(refusal(*table, good_with(R"("shape": [3]})", R"("shape": [3], "bytes": 12})")),
             Contains("columns[1].bytes: unknown key"));
}

TEST_CASE("rows' values are viewed in place, and compressed frames found by their sizes") {
  auto table = episodic_table();
  const Schema& schema = table->schema();
  std::vector<std::uint64_t> bytes;
  constexpr std::string_view kTwoRows = R"([
    {"name": "obs", "dtype": "float32", "shape": [2, 2]},
    {"name": "rew", "dtype": "float32", "shape": [2]},
    {"name": "pixels", "dtype": "uint8", "shape": [2, 4, 4], "compression": "zstd", "bytes": 5}
  ])";
  auto encodings = decode_columns(columns_of(kTwoRows), kAllFields, *table, 2, bytes);
  REQUIRE(encodings);
  auto layout = layout_columns(bytes, 1);
  REQUIRE(layout);
  REQUIRE(layout->offsets.size() == 4);
  std::vector<std::byte> payload(layout->total_bytes);
  const float obs[4] = {1, 2, 3, 4};
  const float rew[2] = {0.5f, -1};
  const std::uint32_t sizes[2] = {2, 3};
  const char frames[5] = {'a', 'b', 'c', 'd', 'e'};
  std::memcpy(payload.data() + layout->offsets[0], obs, sizeof obs);
  std::memcpy(payload.data() + layout->offsets[1], rew, sizeof rew);
  std::memcpy(payload.data() + layout->offsets[2], sizes, sizeof sizes);
  std::memcpy(payload.data() + layout->offsets[3], frames, sizeof frames);
  ColumnViews views;
  CHECK(view_columns(payload, *layout, 0, *encodings, schema, 2, views) == 4);
  REQUIRE(views.values.size() == 3);
  CHECK(views.values[0].size() == 16);
  CHECK(views.values[2].size() == 5);
  REQUIRE(views.frame_sizes.size() == 3);
  CHECK(views.frame_sizes[2].size() == 2);
  CHECK(views.frame_sizes[0].empty());

  const auto second = row_values(views, schema, 1);
  REQUIRE(second.size() == 3);
  float second_obs[2];
  REQUIRE(second[0].size() == sizeof second_obs);
  std::memcpy(second_obs, second[0].data(), sizeof second_obs);
  CHECK(second_obs[0] == 3);
  CHECK(second_obs[1] == 4);
  float second_rew;
  std::memcpy(&second_rew, second[1].data(), sizeof second_rew);
  CHECK(second_rew == -1);
  CHECK(std::string(reinterpret_cast<const char*>(second[2].data()), second[2].size()) == "cde");
  const auto first = row_values(views, schema, 0);
  CHECK(std::string(reinterpret_cast<const char*>(first[2].data()), first[2].size()) == "ab");
}

TEST_CASE("frame sizes that overrun the frames' bytes give an empty value") {
  auto table = episodic_table();
  const Schema& schema = table->schema();
  const std::uint32_t sizes[2] = {4, 9};  // 13 bytes claimed, 5 sent
  const char frames[5] = {'a', 'b', 'c', 'd', 'e'};
  ColumnViews views;
  views.values.resize(schema.size());
  views.frame_sizes.resize(schema.size());
  views.frame_sizes[2] = sizes;
  views.values[2] = std::as_bytes(std::span(frames));
  CHECK(row_values(views, schema, 0)[2].size() == 4);
  CHECK(row_values(views, schema, 1)[2].empty());
  CHECK(row_values(views, schema, 1)[0].empty());  // a field not listed stays empty
}

TEST_CASE("a schema without next_of fields has none to carry") {
  const auto schema = Schema::create({Field{"a", DType::int8, {}}}).value();
  CHECK(next_of_fields(schema).empty());
}
