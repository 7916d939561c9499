// The scheduler against the real binary (docs/ARCHITECTURE.md, "Scheduling"): a learner
// whose sample waits for its rate limiter does not hold the explorers back. The figure is a
// count of requests, not a time: the case is built so that the old behaviour is off by
// orders of magnitude. (Learners among themselves: tests/python/test_scheduling.py, which
// pins the server and the clients to their CPUs.)
#include <catch2/catch.hpp>
#include <thread>

#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

constexpr std::uint64_t kBigItemBytes = 1 << 20;

boost::json::object table(const std::string& name, std::uint64_t capacity, const std::string& field,
                          const std::string& limiter) {
  return json_object(R"({"name": ")" + name + R"(", "capacity": )" + std::to_string(capacity) +
                     R"(, "fields": [)" + field + R"(], "rate_limiter": )" + limiter + "}");
}

constexpr const char* kSmallField = R"({"name": "v", "dtype": "int64", "shape": []})";
constexpr const char* kBigField = R"({"name": "x", "dtype": "uint8", "shape": [1048576]})";
constexpr const char* kMinSizeOne = R"({"kind": "min_size", "min_size_to_sample": 1})";

void insert_small(rc::Client& client, const std::string& name, std::uint64_t n) {
  std::vector<std::int64_t> values(n, 7);
  rc::InsertBatch batch(n);
  batch.add("v", values);
  client.insert(name, batch);
}

void insert_big(rc::Client& client, const std::string& name, std::uint64_t n) {
  std::vector<std::uint8_t> bytes(n * kBigItemBytes, 1);
  rc::InsertBatch batch(n);
  batch.add("x", bytes, {kBigItemBytes});
  client.insert(name, batch);
}

}  // namespace

TEST_CASE("an explorer over its share does not wait for a learner whose sample waits for data",
          "[scheduling]") {
  // learner_share 0.99: an explorer over its share waits for about 100 times its work in
  // learner progress, so a wait for the learner is unmistakable.
  ServerOptions options;
  options.config_json = R"({"limits": {"learner_share": 0.99}})";
  ServerProcess server(options);
  rc::Client setup(server.unix_address());
  setup.create_table(table("limited", 1000, kSmallField,
                           R"({"kind": "sample_to_insert_ratio", "samples_per_insert": 1,
                               "min_size_to_sample": 1, "error_buffer": 10})"));
  setup.create_table(table("small", 1000, kSmallField, kMinSizeOne));
  setup.create_table(table("bulk", 16, kBigField, kMinSizeOne));
  insert_small(setup, "small", 10);

  rc::Client learner(server.unix_address());
  rc::Client explorer(server.unix_address());
  learner.sample("small", 1);       // a learner now
  insert_big(explorer, "bulk", 8);  // 8 MiB: the explorers are over their share
  // The learner's sample of the empty rate-limited table waits for an insert.
  auto parked = learner.sample_async("limited", 1);
  REQUIRE(eventually([&] { return table_stat(setup, "limited", "waiting", "samples") == 1; }));

  // The explorer inserts while the learner keeps progressing on its own table (one small
  // sample every 2 ms: busy on its side between them).
  auto insert = std::async(std::launch::async, [&] { insert_small(explorer, "small", 1); });
  std::uint64_t learner_samples = 0;
  while (!ready_now(insert) && learner_samples < 5000) {
    learner.sample("small", 1);
    ++learner_samples;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // A parked sample is no wait for the thread: the insert goes through at once (at most
  // one 20 ms stall while the learner happens to have a request in its socket). Were it
  // counted, the insert would wait for ~400 MiB of learner work: thousands of samples.
  INFO("learner samples while the insert waited: " << learner_samples);
  CHECK(learner_samples < 200);
  REQUIRE(ready_soon(insert));
  insert.get();
  insert_small(explorer, "limited", 1);  // releases the parked sample
  REQUIRE(ready_soon(parked));
}

}  // namespace replayd::testing
