// Policy versions through the C++ client against the real server (docs/VERSIONS.md): items
// keep the version they were inserted with, samples return it and draw only what a bound
// admits (min_version, or max_staleness against a published value), a bounded sample waits
// for an eligible item, and a table following a value drops the items behind it.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <numeric>

#include "replayd_client/values/published_values.h"
#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

boost::json::object versioned_table(std::string_view name, bool drop_behind) {
  auto description = json_object(R"({"capacity": 100, "seed": 5,
      "fields": [{"name": "item", "dtype": "int64", "shape": []}],
      "sampler": {"kind": "uniform"},
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": 1}})");
  description["name"] = name;
  boost::json::object versions{{"value", "policy"}};
  if (drop_behind) versions["drop_behind"] = 1;
  description["versions"] = std::move(versions);
  return description;
}

void insert_version(rc::Client& client, std::string_view table, std::int64_t first, int count,
                    std::uint64_t version) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(count));
  std::iota(ids.begin(), ids.end(), first);
  rc::InsertBatch batch(ids.size());
  batch.add("item", ids);
  client.insert(table, batch, {.timeout_ms = std::nullopt, .version = version});
}

std::uint64_t publish_version(rc::Client& client) {
  const std::vector<float> weights{1.0f, 2.0f};
  const std::vector<rc::ValueArrayIn> value{
      {"w", rc::DType::float32, {2}, std::as_bytes(std::span(weights))}};
  return rc::publish(client, "policy", value);
}

}  // namespace

TEST_CASE("samples return each item's version and draw only the versions a bound admits") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(versioned_table("replay", false));
  insert_version(client, "replay", 0, 10, 1);
  insert_version(client, "replay", 100, 10, 2);
  insert_version(client, "replay", 200, 10, 3);

  const rc::SampleBatch all =
      client.sample("replay", 300, {.beta = 0.4, .timeout_ms = 10000, .versions = true});
  REQUIRE(all.versions().size() == 300);
  const auto items = all.field("item").as<std::int64_t>();
  CHECK(all.field_count() == 1);
  for (std::size_t i = 0; i < items.size(); ++i)
    CHECK(all.versions()[i] == static_cast<std::uint64_t>(items[i] / 100 + 1));

  const rc::SampleBatch bounded = client.sample(
      "replay", 300, {.beta = 0.4, .timeout_ms = 10000, .versions = true, .min_version = 3});
  for (std::size_t i = 0; i < bounded.size(); ++i) {
    CHECK(bounded.versions()[i] == 3);
    CHECK(bounded.probabilities()[i] == Approx(0.1));  // uniform over the 10 eligible
  }
  CHECK(client.sample("replay", 4, {}).versions().empty());  // not asked for

  // max_staleness counts back from the followed value's version: 3 published, 1 behind.
  for (int i = 0; i < 3; ++i)
    publish_version(client);
  const rc::SampleBatch recent = client.sample(
      "replay", 200, {.beta = 0.4, .timeout_ms = 10000, .versions = true, .max_staleness = 1});
  for (std::uint64_t version : recent.versions())
    CHECK(version >= 2);
}

TEST_CASE("a bounded sample waits until an eligible item arrives") {
  ServerProcess server;
  rc::Client learner(server.unix_address());
  rc::Client explorer(server.unix_address());
  learner.create_table(versioned_table("replay", false));
  insert_version(explorer, "replay", 0, 5, 1);
  CHECK_THROWS_AS(learner.sample("replay", 1, {.beta = 0.4, .timeout_ms = 0, .min_version = 2}),
                  rc::Error);
  auto waiting = learner.sample_async(
      "replay", 8, {.beta = 0.4, .timeout_ms = 30000, .versions = true, .min_version = 2});
  CHECK(waiting.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  insert_version(explorer, "replay", 100, 1, 2);
  const rc::SampleBatch batch = waiting.get();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    CHECK(batch.field("item").as<std::int64_t>()[i] == 100);
    CHECK(batch.versions()[i] == 2);
  }
}

TEST_CASE("a table following a value drops the items more than drop_behind versions behind") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(versioned_table("replay", true));
  insert_version(client, "replay", 0, 4, 1);
  insert_version(client, "replay", 100, 4, 2);
  insert_version(client, "replay", 200, 4, 3);
  CHECK(publish_version(client) == 1);  // keeps versions >= 0
  CHECK(publish_version(client) == 2);  // keeps versions >= 1
  CHECK(client.sample("replay", 50, {}).size() == 50);
  CHECK(publish_version(client) == 3);  // drops version 1
  const rc::SampleBatch after =
      client.sample("replay", 200, {.beta = 0.4, .timeout_ms = 10000, .versions = true});
  for (std::uint64_t version : after.versions())
    CHECK(version >= 2);
  CHECK(publish_version(client) == 4);  // drops version 2
  const rc::SampleBatch last =
      client.sample("replay", 200, {.beta = 0.4, .timeout_ms = 10000, .versions = true});
  for (std::uint64_t version : last.versions())
    CHECK(version == 3);
}

TEST_CASE("a mixed batch bounds each table's share by its own version bound, in one request") {
  ServerProcess server;
  rc::Client learner(server.unix_address());
  rc::Client explorer(server.unix_address());
  learner.create_table(versioned_table("demos", false));
  learner.create_table(versioned_table("online", false));
  insert_version(explorer, "demos", 0, 4, 0);  // demonstrations: no policy
  insert_version(explorer, "online", 100, 10, 1);
  insert_version(explorer, "online", 200, 10, 2);
  const std::vector<std::string> tables{"demos", "online"};
  const std::vector<std::uint64_t> counts{100, 200};
  const std::vector<rc::VersionBoundOption> bounds{{}, {.min_version = 2}};

  const rc::SampleBatch batch =
      learner
          .sample_tables_async(tables, counts, {.beta = 0.4, .timeout_ms = 10000, .versions = true},
                               bounds)
          .get();
  REQUIRE(batch.size() == 300);
  REQUIRE(batch.versions().size() == 300);
  const auto items = batch.field("item").as<std::int64_t>();
  for (std::size_t i = 0; i < 100; ++i) {  // the demos' share: unbounded
    CHECK(items[i] < 4);
    CHECK(batch.versions()[i] == 0);
    CHECK(batch.probabilities()[i] == Approx(0.25));
  }
  for (std::size_t i = 100; i < 300; ++i) {  // the online share: version 2 only
    CHECK(items[i] >= 200);
    CHECK(batch.versions()[i] == 2);
    CHECK(batch.probabilities()[i] == Approx(0.1));  // uniform over the 10 eligible
  }

  // A share that no item of its bound can fill waits, then fails as one request: nothing
  // drawn from the other table either.
  const std::vector<rc::VersionBoundOption> too_new{{}, {.min_version = 3}};
  CHECK_THROWS_AS(
      learner.sample_tables_async(tables, counts, {.beta = 0.4, .timeout_ms = 100}, too_new).get(),
      rc::Error);
  auto waiting =
      learner.sample_tables_async(tables, counts, {.beta = 0.4, .timeout_ms = 30000}, too_new);
  CHECK(waiting.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  insert_version(explorer, "online", 300, 1, 3);
  const rc::SampleBatch later = waiting.get();
  for (std::size_t i = 100; i < 300; ++i)
    CHECK(later.field("item").as<std::int64_t>()[i] == 300);

  const std::vector<rc::VersionBoundOption> one_bound{{.min_version = 1}};
  CHECK_THROWS_AS(learner.sample_tables_async(tables, counts, {}, one_bound), rc::Error);
}

}  // namespace replayd::testing
