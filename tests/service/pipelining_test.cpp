// Many requests in flight on one connection: every reply reaches the call that sent its
// request, and a waiting sample does not hold up the requests behind it.
#include <catch2/catch.hpp>
#include <map>
#include <thread>

#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

// A FIFO queue: samples return items in insertion order, each exactly once.
boost::json::object queue_table(const std::string& name, int capacity) {
  return json_object(R"({"name": ")" + name + R"(", "capacity": )" + std::to_string(capacity) +
                     R"(, "fields": [{"name": "v", "dtype": "int64", "shape": []}],
      "sampler": "fifo", "remover": "fifo", "max_times_sampled": 1,
      "rate_limiter": {"kind": "queue", "size": )" +
                     std::to_string(capacity) + "}}");
}

}  // namespace

TEST_CASE("hundreds of pipelined requests are each answered to the call that sent them",
          "[pipelining]") {
  const std::string transport = GENERATE("unix", "tcp");
  ServerProcess server;
  rc::Client client(server.address(transport));
  constexpr int kInserts = 600;
  client.create_table(queue_table("pipe", kInserts));

  // Interleave inserts (each carrying its index) with pings and info requests, all sent
  // before any reply is read.
  std::vector<std::int64_t> values(kInserts);
  std::vector<std::future<rc::Keys>> inserts;
  std::vector<std::future<void>> pings;
  std::vector<std::future<boost::json::object>> infos;
  rc::InsertBatch batch(1);
  for (int i = 0; i < kInserts; ++i) {
    values[i] = 1000 + i;
    batch.clear(1);
    batch.add("v", std::span<const std::int64_t>(&values[i], 1));
    inserts.push_back(client.insert_async("pipe", batch));
    if (i % 3 == 0) pings.push_back(client.ping_async());
    if (i % 50 == 0) infos.push_back(client.info_async("pipe"));
  }
  std::map<std::uint64_t, std::int64_t> value_of_key;
  std::uint64_t previous_key = 0;
  for (int i = 0; i < kInserts; ++i) {
    REQUIRE(ready_soon(inserts[i]));
    const rc::Keys keys = inserts[i].get();
    REQUIRE(keys.size() == 1);
    // One connection, one table: inserts apply in the order sent, so keys increase.
    if (i > 0) CHECK(keys[0] > previous_key);
    previous_key = keys[0];
    value_of_key[keys[0]] = values[i];
  }
  for (auto& ping : pings)
    ping.get();
  for (auto& info : infos)
    CHECK(info.get().at("tables").as_array().size() == 1);

  // The queue hands items back in insertion order; each key must carry the value its own
  // insert sent, which fails if any reply went to the wrong call.
  const auto sample = client.sample("pipe", kInserts, {.timeout_ms = 10000});
  for (std::size_t row = 0; row < sample.size(); ++row) {
    REQUIRE(value_of_key.count(sample.keys()[row]) == 1);
    CHECK(sample.field("v").as<std::int64_t>()[row] == value_of_key[sample.keys()[row]]);
    CHECK(sample.field("v").as<std::int64_t>()[row] == 1000 + static_cast<std::int64_t>(row));
  }
  CHECK(client.in_flight() == 0);
}

TEST_CASE("several threads share one client and each gets its own replies", "[pipelining]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  constexpr int kThreads = 6;
  constexpr int kPerThread = 150;
  client.create_table(queue_table("shared", kThreads * kPerThread));
  std::vector<std::map<std::uint64_t, std::int64_t>> sent(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::int64_t> values(kPerThread);
      std::vector<std::future<rc::Keys>> futures;
      rc::InsertBatch batch(1);
      for (int i = 0; i < kPerThread; ++i) {
        values[i] = t * 100000 + i;
        batch.clear(1);
        batch.add("v", std::span<const std::int64_t>(&values[i], 1));
        futures.push_back(client.insert_async("shared", batch));
      }
      for (int i = 0; i < kPerThread; ++i)
        sent[t][futures[i].get()[0]] = values[i];
    });
  }
  for (auto& thread : threads)
    thread.join();

  std::map<std::uint64_t, std::int64_t> all;
  for (const auto& per_thread : sent)
    all.insert(per_thread.begin(), per_thread.end());
  REQUIRE(all.size() == kThreads * kPerThread);
  const auto sample = client.sample("shared", kThreads * kPerThread, {.timeout_ms = 10000});
  const auto v = sample.field("v").as<std::int64_t>();
  for (std::size_t row = 0; row < sample.size(); ++row) {
    REQUIRE(all.count(sample.keys()[row]) == 1);
    CHECK(v[row] == all[sample.keys()[row]]);
  }
}

TEST_CASE("a waiting sample does not hold up an insert sent after it on the same connection",
          "[pipelining][waiting]") {
  const std::string transport = GENERATE("unix", "tcp");
  ServerProcess server;
  rc::Client client(server.address(transport));
  client.create_table(json_object(R"({"name": "ooo", "capacity": 100,
      "fields": [{"name": "v", "dtype": "int64", "shape": []}],
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": 10}})"));

  auto sample = client.sample_async("ooo", 2);  // waits: the table is empty
  const std::vector<std::int64_t> five{1, 2, 3, 4, 5};
  rc::InsertBatch batch(5);
  batch.add("v", five);
  auto insert = client.insert_async("ooo", batch);
  // The insert's reply overtakes the sample's: replies arrive out of order.
  REQUIRE(ready_soon(insert));
  CHECK(insert.get().size() == 5);
  CHECK(!ready_now(sample));
  CHECK(table_stat(client, "ooo", "waiting", "samples") == 1);

  // Reaching min_size_to_sample releases the sample.
  client.insert("ooo", batch);
  REQUIRE(ready_soon(sample));
  CHECK(sample.get().size() == 2);
  CHECK(table_stat(client, "ooo", "waiting", "samples") == 0);
}

}  // namespace replayd::testing
