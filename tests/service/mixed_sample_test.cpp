// Mixed batches through the C++ client against the real server: every batch holds exactly
// its tables' counts, rows are grouped by table with each table's own probabilities and
// weights, the counts follow the same largest-remainder rule as the Python client, and a
// mixed batch's priority updates land on each row's own table.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <map>
#include <numeric>

#include "replayd_client/mixed/mixed_sample.h"
#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

boost::json::object table_of(std::string_view name, std::string_view sampler) {
  auto description = json_object(R"({"capacity": 100, "seed": 3,
      "fields": [{"name": "item", "dtype": "int64", "shape": []}],
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": 1}})");
  description["name"] = name;
  boost::json::object kind{{"kind", sampler}};
  if (sampler == "prioritized") kind["priority_exponent"] = 1.0;
  description["sampler"] = std::move(kind);
  return description;
}

void fill(rc::Client& client, std::string_view table, std::int64_t first,
          const std::vector<double>& priorities) {
  std::vector<std::int64_t> ids(priorities.size());
  std::iota(ids.begin(), ids.end(), first);
  rc::InsertBatch batch(ids.size());
  batch.add("item", ids).priorities(priorities);
  client.insert(table, batch);
}

}  // namespace

TEST_CASE("mixed counts follow the largest remainder, ties to the table given first") {
  const std::vector<rc::TableShare> quarter{{"a", 0.25}, {"b", 0.75}};
  CHECK(rc::mixed_counts(quarter, 256) == std::vector<std::uint64_t>{64, 192});
  const std::vector<rc::TableShare> half{{"a", 0.5}, {"b", 0.5}};
  CHECK(rc::mixed_counts(half, 255) == std::vector<std::uint64_t>{128, 127});
  const std::vector<rc::TableShare> thirds{{"a", 1.0 / 3}, {"b", 1.0 / 3}, {"c", 1.0 / 3}};
  CHECK(rc::mixed_counts(thirds, 10) == std::vector<std::uint64_t>{4, 3, 3});
  const std::vector<rc::TableShare> none{{"a", 0.0}, {"b", 1.0}};
  CHECK(rc::mixed_counts(none, 7) == std::vector<std::uint64_t>{0, 7});
  for (std::uint64_t n = 0; n < 300; ++n) {
    const auto counts = rc::mixed_counts(thirds, n);
    CHECK(std::accumulate(counts.begin(), counts.end(), std::uint64_t{0}) == n);
  }
  const std::vector<rc::TableShare> short_sum{{"a", 0.5}, {"b", 0.4}};
  CHECK_THROWS_WITH(rc::mixed_counts(short_sum, 8), Catch::Contains("sum to 0.9"));
  const std::vector<rc::TableShare> twice{{"a", 0.5}, {"a", 0.5}};
  CHECK_THROWS_WITH(rc::mixed_counts(twice, 8), Catch::Contains("named twice"));
  const std::vector<rc::TableShare> negative{{"a", -0.5}, {"b", 1.5}};
  CHECK_THROWS_WITH(rc::mixed_counts(negative, 8), Catch::Contains(">= 0"));
}

TEST_CASE("a mixed batch holds each table's share, drawn and weighted by that table") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(table_of("online", "prioritized"));
  client.create_table(table_of("demos", "uniform"));
  fill(client, "online", 0, {1, 2, 3, 4});
  fill(client, "demos", 100, {1, 1, 1});
  const std::vector<rc::TableShare> shares{{"online", 0.25}, {"demos", 0.75}};
  std::map<std::int64_t, std::uint64_t> drawn;
  for (int round = 0; round < 50; ++round) {
    const rc::MixedBatch batch =
        rc::sample_mixed(client, shares, 64, {.beta = 1.0, .timeout_ms = 30000});
    REQUIRE(batch.size() == 64);
    REQUIRE(batch.part(0).size() == 16);
    REQUIRE(batch.part(1).size() == 48);
    CHECK(batch.tables() == std::vector<std::string>{"online", "demos"});
    CHECK(batch.table_of(15) == 0);
    CHECK(batch.table_of(16) == 1);
    const auto online = batch.part(0).field("item").as<std::int64_t>();
    for (std::size_t i = 0; i < online.size(); ++i) {
      const double priority = static_cast<double>(online[i] + 1);
      CHECK(online[i] < 4);
      CHECK(batch.part(0).probabilities()[i] == Approx(priority / 10));
      // Normalised by the online table's own largest weight (its smallest priority, 1).
      CHECK(batch.part(0).weights()[i] == Approx(1.0 / priority));
      ++drawn[online[i]];
    }
    for (double weight : batch.part(1).weights())
      CHECK(weight == 1.0);
    for (std::int64_t item : batch.part(1).field("item").as<std::int64_t>())
      CHECK(item >= 100);
  }
  CHECK(drawn.size() == 4);
}

TEST_CASE("a mixed batch's priority updates land on each row's own table") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(table_of("online", "prioritized"));
  client.create_table(table_of("demos", "prioritized"));
  fill(client, "online", 0, {1, 1});
  fill(client, "demos", 100, {1, 1});
  const std::vector<rc::TableShare> shares{{"online", 0.5}, {"demos", 0.5}};
  const rc::MixedBatch batch = rc::sample_mixed(client, shares, 2);
  // The online row's item gets priority 0, the demo row's 1000: afterwards online draws
  // only its other item and demos almost only the updated one.
  const std::int64_t online_item = batch.part(0).field("item").as<std::int64_t>()[0];
  const std::int64_t demo_item = batch.part(1).field("item").as<std::int64_t>()[0];
  const std::vector<double> priorities{0.0, 1000.0};
  const auto results = rc::update_mixed_priorities(client, batch, priorities);
  REQUIRE(results.size() == 2);
  const rc::MixedBatch after = rc::sample_mixed(client, shares, 200);
  for (std::int64_t item : after.part(0).field("item").as<std::int64_t>())
    CHECK(item != online_item);
  std::uint64_t updated = 0;
  for (std::int64_t item : after.part(1).field("item").as<std::int64_t>())
    updated += item == demo_item;
  CHECK(updated > 90);  // 1000 / 1001 of 100 draws
  CHECK_THROWS_AS(rc::update_mixed_priorities(client, batch, std::vector<double>{1.0}), rc::Error);
}

TEST_CASE("a plain mixed batch waits for every table at once, and a failure draws nothing") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(table_of("online", "uniform"));
  client.create_table(table_of("demos", "uniform"));  // empty: min_size 1 holds its share
  fill(client, "online", 0, {1, 1, 1});
  const std::vector<rc::TableShare> shares{{"online", 0.5}, {"demos", 0.5}};
  CHECK_THROWS_WITH(rc::sample_mixed(client, shares, 8, {.timeout_ms = 200}),
                    Catch::Contains("table 'demos'"));
  const auto samples = [&](std::string_view table) {
    return table_stat(client, table, "counters", "samples");
  };
  CHECK(samples("online") == 0);  // one request: nothing was drawn from online either

  // A share that arrives later releases the waiting batch.
  auto waiting = std::async(std::launch::async, [&] {
    rc::Client learner(server.unix_address());
    return rc::sample_mixed(learner, shares, 8, {.timeout_ms = 30000});
  });
  CHECK(waiting.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  fill(client, "demos", 100, {1});
  const rc::MixedBatch batch = waiting.get();
  REQUIRE(batch.part(1).size() == 4);
  for (std::int64_t item : batch.part(1).field("item").as<std::int64_t>())
    CHECK(item == 100);
  CHECK(samples("online") == 4);
  CHECK(samples("demos") == 4);

  auto other = json_object(R"({"name": "other", "capacity": 10,
      "fields": [{"name": "item", "dtype": "int32", "shape": []}]})");
  client.create_table(other);
  const std::vector<rc::TableShare> different{{"online", 0.5}, {"other", 0.5}};
  CHECK_THROWS_WITH(rc::sample_mixed(client, different, 8, {.timeout_ms = 0}),
                    Catch::Contains("field 'item' differs between table 'online' and table "
                                    "'other'"));
}

}  // namespace replayd::testing
