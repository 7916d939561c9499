// Every dtype and several shapes travel insert -> table -> sample bit for bit, over Unix
// sockets and TCP, through the C++ client.
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <random>

#include <boost/json/array.hpp>

#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

const std::vector<std::string> kDTypes{"bool",   "int8",    "int16",   "int32",
                                       "int64",  "uint8",   "uint16",  "uint32",
                                       "uint64", "float16", "float32", "float64"};
const std::vector<std::vector<std::uint64_t>> kShapes{{}, {3}, {2, 3, 2}};

struct FieldData {
  std::string name;
  rc::DType dtype;
  std::vector<std::uint64_t> shape;
  std::size_t item_bytes = 0;
  std::vector<std::byte> bytes;  // n items
};

// One field per (dtype, shape), filled with seeded random bytes (0/1 for bool), so every bit
// pattern of every type (NaNs, extremes) may appear.
std::vector<FieldData> make_fields(std::uint64_t n) {
  std::mt19937_64 random(42);
  std::vector<FieldData> fields;
  for (const auto& dtype : kDTypes) {
    for (std::size_t s = 0; s < kShapes.size(); ++s) {
      FieldData field;
      field.name = dtype;
      field.name.append("_rank").append(std::to_string(kShapes[s].size()));
      field.dtype = *rc::parse_dtype(dtype);
      field.shape = kShapes[s];
      std::uint64_t values = 1;
      for (auto dim : field.shape)
        values *= dim;
      field.item_bytes = values * rc::dtype_bytes(field.dtype);
      field.bytes.resize(n * field.item_bytes);
      for (auto& byte : field.bytes) {
        byte = static_cast<std::byte>(dtype == "bool" ? random() % 2 : random() % 256);
      }
      fields.push_back(std::move(field));
    }
  }
  return fields;
}

boost::json::object description_of(const std::string& name, const std::vector<FieldData>& fields) {
  boost::json::array list;
  for (const auto& field : fields) {
    boost::json::array shape(field.shape.begin(), field.shape.end());
    list.push_back(boost::json::object{
        {"name", field.name}, {"dtype", rc::dtype_name(field.dtype)}, {"shape", std::move(shape)}});
  }
  return boost::json::object{{"name", name},
                             {"capacity", 100},
                             {"fields", std::move(list)},
                             {"sampler", "uniform"},
                             {"rate_limiter", {{"kind", "min_size"}, {"min_size_to_sample", 1}}}};
}

}  // namespace

TEST_CASE("every dtype and shape survives insert and sample bit for bit", "[roundtrip]") {
  const std::string transport = GENERATE("unix", "tcp");
  INFO("transport " << transport);
  ServerProcess server;
  rc::Client client(server.address(transport));

  constexpr std::uint64_t n = 7;
  const auto fields = make_fields(n);
  client.create_table(description_of("all_types", fields));
  rc::InsertBatch batch(n);
  for (const auto& field : fields)
    batch.add(field.name, field.dtype, field.shape, field.bytes);
  const rc::Keys keys = client.insert("all_types", batch);
  REQUIRE(keys.size() == n);
  std::map<std::uint64_t, std::size_t> item_of_key;
  for (std::size_t i = 0; i < n; ++i)
    item_of_key[keys[i]] = i;
  REQUIRE(item_of_key.size() == n);

  const rc::SampleBatch sample = client.sample("all_types", 64, {.timeout_ms = 10000});
  REQUIRE(sample.size() == 64);
  REQUIRE(sample.field_count() == fields.size());
  for (std::size_t f = 0; f < fields.size(); ++f) {
    const FieldData& field = fields[f];
    const rc::ColumnView column = sample.field(field.name);
    INFO("field " << field.name);
    CHECK(column.dtype() == field.dtype);
    std::vector<std::uint64_t> expected_shape{64};
    expected_shape.insert(expected_shape.end(), field.shape.begin(), field.shape.end());
    CHECK(column.shape() == expected_shape);
    REQUIRE(column.bytes().size() == 64 * field.item_bytes);
    // Column views must be 8-aligned in place (the protocol's promise for zero-copy views).
    CHECK(reinterpret_cast<std::uintptr_t>(column.bytes().data()) % 8 == 0);
    for (std::size_t row = 0; row < 64; ++row) {
      const auto found = item_of_key.find(sample.keys()[row]);
      REQUIRE(found != item_of_key.end());
      const std::byte* sent = field.bytes.data() + found->second * field.item_bytes;
      const std::byte* got = column.bytes().data() + row * field.item_bytes;
      CHECK(std::memcmp(sent, got, field.item_bytes) == 0);
    }
  }
  for (std::size_t row = 0; row < 64; ++row) {
    CHECK(sample.probabilities()[row] == Approx(1.0 / n));
    CHECK(sample.weights()[row] == 1.0);
    CHECK(sample.times_sampled()[row] >= 1);
  }
}

TEST_CASE("typed column views read back the values that were inserted", "[roundtrip]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(json_object(R"({"name": "typed", "capacity": 10,
      "fields": [{"name": "obs", "dtype": "float32", "shape": [2]},
                 {"name": "act", "dtype": "int64", "shape": []}],
      "sampler": "fifo", "remover": "fifo", "max_times_sampled": 1,
      "rate_limiter": {"kind": "queue", "size": 10}})"));
  const std::vector<float> obs{0.5f, -1.5f, 2.25f, 1e30f, -0.0f, 3.0f};
  const std::vector<std::int64_t> act{INT64_MIN, 0, INT64_MAX};
  rc::InsertBatch batch(3);
  batch.add("obs", obs, {2}).add("act", act);
  client.insert("typed", batch);
  const auto sample = client.sample("typed", 3, {.timeout_ms = 10000});
  const auto got_obs = sample.field("obs").as<float>();
  const auto got_act = sample.field("act").as<std::int64_t>();
  CHECK(std::vector<float>(got_obs.begin(), got_obs.end()) == obs);
  CHECK(std::vector<std::int64_t>(got_act.begin(), got_act.end()) == act);
  CHECK_THROWS_AS(sample.field("act").as<double>(), rc::Error);
  CHECK_THROWS_AS(sample.field("missing"), rc::Error);
}

TEST_CASE("priorities, update_priorities and delete act on the items the keys name",
          "[roundtrip]") {
  const std::string transport = GENERATE("unix", "tcp");
  ServerProcess server;
  rc::Client client(server.address(transport));
  client.create_table(json_object(R"({"name": "prio", "capacity": 10,
      "fields": [{"name": "x", "dtype": "int32", "shape": []}],
      "sampler": {"kind": "prioritized", "priority_exponent": 1.0},
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": 1}})"));
  const std::vector<std::int32_t> x{10, 20, 30};
  const std::vector<double> priorities{0.0, 0.0, 1.0};
  rc::InsertBatch batch(3);
  batch.add("x", x).priorities(priorities);
  const rc::Keys keys = client.insert("prio", batch);

  // Only the third item has a non-zero priority, so every draw is that item.
  auto sample = client.sample("prio", 16, {.timeout_ms = 10000});
  for (auto value : sample.field("x").as<std::int32_t>())
    CHECK(value == 30);

  const std::vector<std::uint64_t> update_keys{keys[0], keys[2]};
  const std::vector<double> update_priorities{1.0, 0.0};
  const auto updated = client.update_priorities("prio", update_keys, update_priorities);
  CHECK(updated.applied == 2);
  CHECK(updated.stale == 0);
  sample = client.sample("prio", 16, {.timeout_ms = 10000});
  for (auto value : sample.field("x").as<std::int32_t>())
    CHECK(value == 10);

  const std::vector<std::uint64_t> doomed{keys[0], keys[0] + 1000};
  const auto deleted = client.delete_keys("prio", doomed);
  CHECK(deleted.deleted == 1);
  CHECK(deleted.stale == 1);
  CHECK(table_size(client, "prio") == 2);
  const auto stale_update = client.update_priorities("prio", std::vector<std::uint64_t>{keys[0]},
                                                     std::vector<double>{2.0});
  CHECK(stale_update.applied == 0);
  CHECK(stale_update.stale == 1);
}

TEST_CASE("table administration: create, list, info, reset and drop", "[roundtrip]") {
  ServerProcess server;
  rc::Client client(server.tcp_address());
  CHECK(client.server_hello().protocol == 1);
  CHECK(client.server_hello().limits.contains("max_batch_items"));
  const auto description = json_object(R"({"name": "admin", "capacity": 5,
      "fields": [{"name": "x", "dtype": "uint8", "shape": [1]}]})");
  const auto info = client.create_table(description);
  CHECK(info.at("name").as_string() == "admin");
  CHECK(info.at("capacity").to_number<int>() == 5);
  client.create_table(description, /*exist_ok=*/true);
  CHECK(error_code_of([&] { client.create_table(description); }) == rc::ErrorCode::already_exists);
  bool listed = false;
  for (const auto& table : client.list_tables())
    listed |= table.as_object().at("name").as_string() == "admin";
  CHECK(listed);

  const std::vector<std::uint8_t> x{1, 2, 3};
  rc::InsertBatch batch(3);
  batch.add("x", x, {1});
  client.insert("admin", batch);
  CHECK(table_size(client, "admin") == 3);
  client.reset_table("admin");
  CHECK(table_size(client, "admin") == 0);
  client.drop_table("admin");
  CHECK(error_code_of([&] { client.info("admin"); }) == rc::ErrorCode::not_found);
  client.ping();
}

}  // namespace replayd::testing
