// Tests of service/protocol/row_batch.h: the columns, episode ids, priorities and final
// observations of an insert or append_steps payload, each checked against the table and the
// payload's size before anything is stored; on error the payload is left to the caller.
#include <catch2/catch.hpp>
#include <cstring>

#include "service/protocol/batch_layout.h"
#include "service/protocol/row_batch.h"

using namespace replayd;
using namespace replayd::service;
using namespace replayd::service::commands;
using Catch::Contains;

namespace {

namespace json = boost::json;

std::unique_ptr<Table> plain_table() {
  TableConfig config;
  config.name = "replay";
  config.schema =
      Schema::create({Field{"obs", DType::float32, {2}}, Field{"act", DType::int64, {}}}).value();
  config.capacity = 16;
  return Table::create(config).value();
}

std::unique_ptr<Table> episodic_table() {
  TableConfig config;
  config.name = "walker";
  Field obs{"obs", DType::float32, {2}};
  obs.next_of = true;
  config.schema = Schema::create({obs, Field{"rew", DType::float32, {}}}).value();
  config.capacity = 16;
  config.episodes.enabled = true;
  config.episodes.bootstrap_fields = {};
  auto table = Table::create(config);
  INFO((table ? std::string() : table.error().message));
  REQUIRE(table);
  return std::move(table).value();
}

struct Request {
  json::value meta;
  ByteBuffer payload;
};

// Builds a payload of the given columns (each padded to 8 bytes, as clients lay them out).
ByteBuffer payload_of(const std::vector<std::vector<std::byte>>& columns) {
  std::vector<std::uint64_t> sizes;
  for (const auto& column : columns)
    sizes.push_back(column.size());
  const auto layout = layout_columns(sizes, 1).value();
  ByteBuffer payload(layout.total_bytes);
  std::memset(payload.data(), 0, payload.size());
  for (std::size_t c = 0; c < columns.size(); ++c)
    std::memcpy(payload.data() + layout.offsets[c], columns[c].data(), columns[c].size());
  return payload;
}

template <typename T>
std::vector<std::byte> bytes_of(std::vector<T> values) {
  const auto bytes = std::as_bytes(std::span(values));
  return {bytes.begin(), bytes.end()};
}

constexpr std::string_view kPlainColumns =
    R"({"columns": [{"name": "obs", "dtype": "float32", "shape": [2, 2]},
                    {"name": "act", "dtype": "int64", "shape": [2]}]})";

Result<RowBatch> decode(std::string_view meta_text, const Table& table, std::uint64_t n,
                        ByteBuffer& payload, bool with_episodes, std::uint64_t ends = 0) {
  const json::value meta = json::parse(meta_text);
  JsonReader args = JsonReader::of(meta, "").value();
  auto batch = decode_row_batch(args, table, n, payload, with_episodes, ends);
  return batch;
}

std::string refusal(std::string_view meta_text, const Table& table, std::uint64_t n,
                    ByteBuffer& payload, bool with_episodes, std::uint64_t ends = 0) {
  auto batch = decode(meta_text, table, n, payload, with_episodes, ends);
  REQUIRE_FALSE(batch);
  CHECK(batch.error().code == ErrorCode::invalid_argument);
  return batch.error().message;
}

}  // namespace

TEST_CASE("an insert batch views each field's rows in the payload it takes") {
  auto table = plain_table();
  ByteBuffer payload = payload_of({bytes_of<float>({1, 2, 3, 4}), bytes_of<std::int64_t>({7, 8})});
  const std::byte* bytes = payload.data();
  auto batch = decode(kPlainColumns, *table, 2, payload, false);
  INFO((batch ? std::string() : batch.error().message));
  REQUIRE(batch);
  CHECK(batch->n == 2);
  CHECK(batch->payload.data() == bytes);  // taken, not copied
  REQUIRE(batch->rows.values.size() == 2);
  CHECK(batch->rows.values[0].data() == bytes);
  CHECK(batch->rows.values[0].size() == 16);
  std::int64_t act[2];
  std::memcpy(act, batch->rows.values[1].data(), sizeof act);
  CHECK(act[0] == 7);
  CHECK(act[1] == 8);
  CHECK(batch->priorities.empty());
  CHECK(batch->episodes.empty());
  CHECK(batch->finals.values.empty());
}

TEST_CASE("priorities follow the columns, one float64 per row") {
  auto table = plain_table();
  ByteBuffer payload = payload_of(
      {bytes_of<float>({1, 2, 3, 4}), bytes_of<std::int64_t>({7, 8}), bytes_of<double>({0.25, 4})});
  auto batch = decode(
      R"({"priorities": true, "columns": [{"name": "obs", "dtype": "float32", "shape": [2, 2]},
                                          {"name": "act", "dtype": "int64", "shape": [2]}]})",
      *table, 2, payload, false);
  REQUIRE(batch);
  REQUIRE(batch->priorities.size() == 2);
  CHECK(batch->priorities[0] == 0.25);
  CHECK(batch->priorities[1] == 4);
}

TEST_CASE("an append batch carries one episode id per row, then priorities") {
  auto table = episodic_table();
  ByteBuffer payload =
      payload_of({bytes_of<float>({1, 2, 3, 4, 5, 6}), bytes_of<float>({0, 1, 0}),
                  bytes_of<std::uint64_t>({11, 11, 12}), bytes_of<double>({1, 2, 3})});
  auto batch = decode(
      R"({"priorities": true, "columns": [{"name": "obs", "dtype": "float32", "shape": [3, 2]},
                                          {"name": "rew", "dtype": "float32", "shape": [3]}]})",
      *table, 3, payload, true);
  INFO((batch ? std::string() : batch.error().message));
  REQUIRE(batch);
  CHECK(std::vector<std::uint64_t>(batch->episodes.begin(), batch->episodes.end()) ==
        std::vector<std::uint64_t>{11, 11, 12});
  CHECK(std::vector<double>(batch->priorities.begin(), batch->priorities.end()) ==
        std::vector<double>{1, 2, 3});
}

TEST_CASE("an append that ends episodes carries their final observations") {
  auto table = episodic_table();
  ByteBuffer payload =
      payload_of({bytes_of<float>({1, 2, 3, 4}), bytes_of<float>({0, 1}),
                  bytes_of<std::uint64_t>({5, 6}), bytes_of<float>({50, 51, 60, 61})});
  auto batch = decode(
      R"({"columns": [{"name": "obs", "dtype": "float32", "shape": [2, 2]},
                      {"name": "rew", "dtype": "float32", "shape": [2]}],
          "final_columns": [{"name": "obs", "dtype": "float32", "shape": [2, 2]}]})",
      *table, 2, payload, true, 2);
  INFO((batch ? std::string() : batch.error().message));
  REQUIRE(batch);
  REQUIRE(batch->finals.values.size() == 2);
  REQUIRE(batch->finals.values[0].size() == 16);
  CHECK(batch->finals.values[1].empty());  // rew is not next_of
  const auto second = row_values(batch->finals, table->schema(), 1);
  float obs[2];
  std::memcpy(obs, second[0].data(), sizeof obs);
  CHECK(obs[0] == 60);
  CHECK(obs[1] == 61);
}

TEST_CASE("a payload of the wrong size is refused with both sizes and left to the caller") {
  auto table = plain_table();
  ByteBuffer payload = payload_of({bytes_of<float>({1, 2, 3, 4})});  // act missing
  const std::byte* bytes = payload.data();
  CHECK_THAT(refusal(kPlainColumns, *table, 2, payload, false),
             Contains("table 'replay'") && Contains("payload holds 16 bytes") &&
                 Contains("the columns need 32"));
  CHECK(payload.data() == bytes);
  CHECK(payload.size() == 16);
  ByteBuffer empty;
  CHECK_THAT(refusal(kPlainColumns, *table, 2, empty, false), Contains("payload holds 0 bytes"));
  ByteBuffer with_priorities =
      payload_of({bytes_of<float>({1, 2, 3, 4}), bytes_of<std::int64_t>({7, 8})});
  CHECK_THAT(refusal(R"({"priorities": true, "columns": [
                   {"name": "obs", "dtype": "float32", "shape": [2, 2]},
                   {"name": "act", "dtype": "int64", "shape": [2]}]})",
                     *table, 2, with_priorities, false),
             Contains("the columns need 48"));
}

TEST_CASE("a missing column list is refused") {
  auto table = plain_table();
  ByteBuffer payload;
  CHECK_THAT(refusal("{}", *table, 1, payload, false),
             Contains("table 'replay': columns: expected an array"));
  CHECK_THAT(refusal(R"({"columns": {}})", *table, 1, payload, false),
             Contains("columns: expected an array"));
}

TEST_CASE("a column list of the wrong length names the missing and unknown fields") {
  auto table = plain_table();
  ByteBuffer payload;
  const auto message = refusal(R"({"columns": [{"name": "obs"}, {"name": "action"},
                                               {"name": "extra"}]})",
                               *table, 1, payload, false);
  CHECK_THAT(message, Contains("columns lists 3 fields, the table has 2") &&
                          Contains("missing field 'act'") &&
                          Contains("unknown field 'action', 'extra'"));
  CHECK_THAT(refusal(R"({"columns": [{"name": "obs"}]})", *table, 1, payload, false),
             Contains("missing field 'act'"));
}

TEST_CASE("a bad column is refused with the decoder's reason") {
  auto table = plain_table();
  ByteBuffer payload = payload_of({bytes_of<float>({1, 2}), bytes_of<std::int64_t>({7})});
  CHECK_THAT(refusal(R"({"columns": [{"name": "obs", "dtype": "float32", "shape": [1, 2]},
                                     {"name": "act", "dtype": "int32", "shape": [1]}]})",
                     *table, 1, payload, false),
             Contains("field 'act': dtype int32"));
}

TEST_CASE("priorities must be true or false") {
  auto table = plain_table();
  ByteBuffer payload;
  CHECK_THAT(refusal(R"({"priorities": 1})", *table, 1, payload, false),
             Contains("priorities: expected true or false"));
}

TEST_CASE("final observations are refused where no episode ends or nothing is next_of") {
  auto plain = plain_table();
  auto episodic = episodic_table();
  ByteBuffer payload;
  constexpr std::string_view kWithFinals =
      R"({"columns": [{"name": "obs", "dtype": "float32", "shape": [1, 2]},
                      {"name": "rew", "dtype": "float32", "shape": [1]}],
          "final_columns": [{"name": "obs", "dtype": "float32", "shape": [1, 2]}]})";
  CHECK_THAT(refusal(kWithFinals, *episodic, 1, payload, false, 1),
             Contains("final_columns: only an append"));
  CHECK_THAT(refusal(kWithFinals, *episodic, 1, payload, true, 0),
             Contains("final_columns: only an append"));
  CHECK_THAT(refusal(R"({"columns": [{"name": "obs", "dtype": "float32", "shape": [1, 2]},
                                     {"name": "act", "dtype": "int64", "shape": [1]}],
                         "final_columns": []})",
                     *plain, 1, payload, true, 1),
             Contains("final_columns: only an append"));
  CHECK_THAT(refusal(R"({"columns": [{"name": "obs", "dtype": "float32", "shape": [1, 2]},
                                     {"name": "rew", "dtype": "float32", "shape": [1]}],
                         "final_columns": []})",
                     *episodic, 1, payload, true, 1),
             Contains("final_columns: expected one column per next_of field"));
}
