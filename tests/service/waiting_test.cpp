// Blocking semantics: samples wait for min size, timeouts, inserts held back by the
// samples-per-insert ratio, and waiters that vanish with their connection.
#include <catch2/catch.hpp>

#include "replayd_client/tables.h"
#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

boost::json::object min_size_table(const std::string& name, int min_size) {
  return json_object(R"({"name": ")" + name + R"(", "capacity": 1000,
      "fields": [{"name": "v", "dtype": "int64", "shape": []}],
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": )" +
                     std::to_string(min_size) + "}}");
}

rc::Keys insert_values(rc::Client& client, const std::string& table,
                       std::vector<std::int64_t> values, rc::InsertOptions options = {}) {
  rc::InsertBatch batch(values.size());
  batch.add("v", values);
  return client.insert(table, batch, options);
}

}  // namespace

TEST_CASE("a sample waits until the table holds min_size_to_sample items, then returns",
          "[waiting]") {
  ServerProcess server;
  rc::Client learner(server.unix_address());
  rc::Client explorer(server.tcp_address());
  learner.create_table(min_size_table("min3", 3));

  auto sample = learner.sample_async("min3", 4);
  REQUIRE(eventually([&] { return table_stat(explorer, "min3", "waiting", "samples") == 1; }));
  insert_values(explorer, "min3", {1});
  insert_values(explorer, "min3", {2});
  explorer.ping();
  CHECK(!ready_now(sample));
  CHECK(table_stat(explorer, "min3", "waiting", "samples") == 1);

  insert_values(explorer, "min3", {3});
  REQUIRE(ready_soon(sample));
  const auto batch = sample.get();
  CHECK(batch.size() == 4);
  for (auto v : batch.field("v").as<std::int64_t>())
    CHECK((v >= 1 && v <= 3));
  CHECK(table_stat(explorer, "min3", "waiting", "samples") == 0);
}

TEST_CASE("a sample that is not admitted within timeout_ms fails with timeout", "[waiting]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(min_size_table("never", 5));
  insert_values(client, "never", {1, 2});

  CHECK(error_code_of([&] { client.sample("never", 1, {.timeout_ms = 0}); }) ==
        rc::ErrorCode::timeout);
  CHECK(error_code_of([&] { client.sample("never", 1, {.timeout_ms = 100}); }) ==
        rc::ErrorCode::timeout);
  // The timed-out request left nothing waiting and the connection still serves.
  CHECK(table_stat(client, "never", "waiting", "samples") == 0);
  client.ping();
}

TEST_CASE("an insert held back by the samples-per-insert ratio is released by a sample",
          "[waiting]") {
  ServerProcess server;
  rc::Client explorer(server.unix_address());
  rc::Client learner(server.unix_address());
  // samples_per_insert 1, min_size 1, error_buffer 2: at most 3 inserts ahead of samples.
  explorer.create_table(json_object(R"({"name": "ratio", "capacity": 100,
      "fields": [{"name": "v", "dtype": "int64", "shape": []}],
      "rate_limiter": {"kind": "sample_to_insert_ratio", "samples_per_insert": 1.0,
                       "min_size_to_sample": 1, "error_buffer": 2}})"));
  insert_values(explorer, "ratio", {1});
  insert_values(explorer, "ratio", {2});
  insert_values(explorer, "ratio", {3});
  CHECK(error_code_of([&] { insert_values(explorer, "ratio", {4}, {.timeout_ms = 0}); }) ==
        rc::ErrorCode::timeout);

  const std::vector<std::int64_t> four{4};
  rc::InsertBatch batch(1);
  batch.add("v", four);
  auto held = explorer.insert_async("ratio", batch);
  REQUIRE(eventually([&] { return table_stat(learner, "ratio", "waiting", "inserts") == 1; }));
  CHECK(!ready_now(held));

  learner.sample("ratio", 1, {.timeout_ms = 10000});
  REQUIRE(ready_soon(held));
  CHECK(held.get().size() == 1);
  CHECK(table_stat(learner, "ratio", "waiting", "inserts") == 0);
  CHECK(table_size(learner, "ratio") == 4);
}

TEST_CASE("a client that disconnects while waiting leaves no waiter behind", "[waiting]") {
  const std::string transport = GENERATE("unix", "tcp");
  ServerProcess server;
  rc::Client observer(server.address(transport));
  observer.create_table(min_size_table("ghost", 2));
  observer.create_table(json_object(R"({"name": "full", "capacity": 100,
      "fields": [{"name": "v", "dtype": "int64", "shape": []}],
      "rate_limiter": {"kind": "queue", "size": 1}})"));
  insert_values(observer, "full", {1});  // the queue is full: the next insert waits

  {
    rc::Client waiter(server.address(transport));
    std::vector<std::future<rc::SampleBatch>> samples;
    for (int i = 0; i < 5; ++i)
      samples.push_back(waiter.sample_async("ghost", 1));
    const std::vector<std::int64_t> two{2};
    rc::InsertBatch batch(1);
    batch.add("v", two);
    auto insert = waiter.insert_async("full", batch);
    REQUIRE(eventually([&] { return table_stat(observer, "ghost", "waiting", "samples") == 5; }));
    REQUIRE(eventually([&] { return table_stat(observer, "full", "waiting", "inserts") == 1; }));
    waiter.close();
    // The waiter's own futures fail with connection_lost rather than hanging.
    REQUIRE(ready_soon(samples.front()));
    CHECK(error_code_of([&] { samples.front().get(); }) == rc::ErrorCode::connection_lost);
    CHECK(error_code_of([&] { insert.get(); }) == rc::ErrorCode::connection_lost);
  }
  REQUIRE(eventually([&] { return table_stat(observer, "ghost", "waiting", "samples") == 0; }));
  REQUIRE(eventually([&] { return table_stat(observer, "full", "waiting", "inserts") == 0; }));

  // The abandoned requests consumed nothing: the items inserted now are all there to sample,
  // and the abandoned insert was never applied.
  insert_values(observer, "ghost", {7, 8});
  CHECK(table_stat(observer, "ghost", "counters", "samples") == 0);
  const auto batch = observer.sample("ghost", 2, {.timeout_ms = 10000});
  CHECK(batch.size() == 2);
  CHECK(table_size(observer, "full") == 1);
}

TEST_CASE("dropping a table fails its waiting samples with not_found", "[waiting]") {
  ServerProcess server;
  rc::Client waiter(server.unix_address());
  rc::Client admin(server.unix_address());
  admin.create_table(min_size_table("doomed", 10));
  auto sample = waiter.sample_async("doomed", 1);
  REQUIRE(eventually([&] { return table_stat(admin, "doomed", "waiting", "samples") == 1; }));
  admin.drop_table("doomed");
  REQUIRE(ready_soon(sample));
  CHECK(error_code_of([&] { sample.get(); }) == rc::ErrorCode::not_found);
  waiter.ping();  // the connection stays open
}

TEST_CASE(
    "queue_table and stack_table hand out each item once, in order, and block when "
    "full or empty",
    "[waiting]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  const auto fields = json_object(R"({"f": [{"name": "v", "dtype": "int64", "shape": []}]})");
  client.create_table(rc::queue_table("q", fields.at("f").as_array(), 3));
  client.create_table(rc::stack_table("s", fields.at("f").as_array(), 3));
  for (const std::string table : {"q", "s"}) {
    INFO(table);
    CHECK(error_code_of([&] { client.sample(table, 1, {.timeout_ms = 0}); }) ==
          rc::ErrorCode::timeout);  // empty
    insert_values(client, table, {1, 2, 3});
    CHECK(error_code_of([&] { insert_values(client, table, {4}, {.timeout_ms = 0}); }) ==
          rc::ErrorCode::timeout);  // full
    std::vector<std::int64_t> order;
    for (int i = 0; i < 3; ++i)
      order.push_back(
          client.sample(table, 1, {.timeout_ms = 1000}).field("v").as<std::int64_t>()[0]);
    CHECK(order ==
          (table == "q" ? std::vector<std::int64_t>{1, 2, 3} : std::vector<std::int64_t>{3, 2, 1}));
  }
}

}  // namespace replayd::testing
