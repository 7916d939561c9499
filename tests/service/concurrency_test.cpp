// Many explorers and learners at once on one table, each thread with its own client: every
// inserted item is sampled exactly once with its contents intact (a FIFO queue table with
// max_times_sampled 1 makes each item sampleable exactly once).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <thread>

#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {

TEST_CASE("explorers and learners at once lose and duplicate no item", "[concurrency]") {
  ServerProcess server;
  constexpr int kExplorers = 4;
  constexpr int kLearners = 3;
  constexpr int kBatchesPerExplorer = 60;
  constexpr int kBatch = 10;
  constexpr int kWidth = 6;
  constexpr int kTotal = kExplorers * kBatchesPerExplorer * kBatch;
  {
    rc::Client admin(server.unix_address());
    admin.create_table(json_object(R"({"name": "queue", "capacity": 500,
        "fields": [{"name": "id", "dtype": "int64", "shape": []},
                   {"name": "body", "dtype": "int32", "shape": [6]}],
        "sampler": "fifo", "remover": "fifo", "max_times_sampled": 1,
        "rate_limiter": {"kind": "queue", "size": 500}})"));
  }

  std::atomic<int> consumed{0};
  std::mutex seen_mutex;
  std::vector<std::int64_t> seen;
  std::atomic<int> bad_bodies{0};
  std::atomic<int> bad_times_sampled{0};
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kExplorers + kLearners);

  for (int e = 0; e < kExplorers; ++e) {
    threads.emplace_back([&, e] {
      try {
        // Alternate transports across explorers.
        rc::Client client(e % 2 ? server.tcp_address() : server.unix_address());
        std::vector<std::int64_t> ids(kBatch);
        std::vector<std::int32_t> body(kBatch * kWidth);
        std::vector<std::future<rc::Keys>> in_flight;
        for (int b = 0; b < kBatchesPerExplorer; ++b) {
          for (int i = 0; i < kBatch; ++i) {
            ids[i] = std::int64_t{e} * 1'000'000 + b * kBatch + i;
            for (int j = 0; j < kWidth; ++j)
              body[i * kWidth + j] = static_cast<std::int32_t>(ids[i] * 7 + j);
          }
          rc::InsertBatch batch(kBatch);
          batch.add("id", ids).add("body", body, {kWidth});
          in_flight.push_back(client.insert_async("queue", batch));  // sent before returning
          if (in_flight.size() >= 4) {  // a few batches in flight per explorer
            in_flight.front().get();
            in_flight.erase(in_flight.begin());
          }
        }
        for (auto& future : in_flight)
          future.get();
      } catch (const std::exception& error) {
        failures[e] = error.what();
      }
    });
  }
  for (int l = 0; l < kLearners; ++l) {
    threads.emplace_back([&, l] {
      try {
        rc::Client client(l % 2 ? server.unix_address() : server.tcp_address());
        while (consumed.load() < kTotal) {
          rc::SampleBatch sample;
          try {
            sample = client.sample("queue", kBatch, {.timeout_ms = 200});
          } catch (const rc::Error& error) {
            if (error.code() == rc::ErrorCode::timeout) continue;  // re-check whether done
            throw;
          }
          const auto id = sample.field("id").as<std::int64_t>();
          const auto body = sample.field("body").as<std::int32_t>();
          for (std::size_t i = 0; i < sample.size(); ++i) {
            for (int j = 0; j < kWidth; ++j) {
              if (body[i * kWidth + j] != static_cast<std::int32_t>(id[i] * 7 + j)) ++bad_bodies;
            }
            if (sample.times_sampled()[i] != 1) ++bad_times_sampled;
          }
          {
            std::lock_guard lock(seen_mutex);
            seen.insert(seen.end(), id.begin(), id.end());
          }
          consumed += static_cast<int>(sample.size());
        }
      } catch (const std::exception& error) {
        failures[kExplorers + l] = error.what();
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  for (const auto& failure : failures)
    CHECK(failure.empty());

  std::vector<std::int64_t> expected;
  for (int e = 0; e < kExplorers; ++e) {
    for (int i = 0; i < kBatchesPerExplorer * kBatch; ++i)
      expected.push_back(std::int64_t{e} * 1'000'000 + i);
  }
  std::sort(seen.begin(), seen.end());
  CHECK(seen.size() == expected.size());
  CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());  // no duplicates
  CHECK(seen == expected);                                            // nothing lost
  CHECK(bad_bodies.load() == 0);
  CHECK(bad_times_sampled.load() == 0);

  rc::Client observer(server.unix_address());
  CHECK(table_size(observer, "queue") == 0);
  CHECK(table_stat(observer, "queue", "counters", "inserts") == kTotal);
}

}  // namespace replayd::testing
