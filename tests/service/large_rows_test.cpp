// Large fields are written to the socket straight from the table's rows. A row must reach
// the client exactly as it was when sampled, although inserts overwrite slots all the time
// while replies wait for a slow reader (the server then copies what the socket did not
// take). Every sampled frame is checked against the pattern of its item's id.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

constexpr std::uint64_t kFrameBytes = 8192;  // large enough to be written from the table

std::uint8_t pattern(std::int64_t id, std::uint64_t at) {
  return static_cast<std::uint8_t>((static_cast<std::uint64_t>(id) * 131 + at * 7) & 0xFF);
}

// Inserts batches of 8 items with ids 0, 1, 2, ... (8 requests in flight) until `stop`.
void explore(const std::string& address, const std::atomic<bool>& stop,
             std::atomic<std::int64_t>& inserted) {
  rc::Client client(address);
  std::int64_t next_id = 0;
  std::vector<std::future<rc::Keys>> in_flight;
  while (!stop.load()) {
    std::vector<std::int64_t> ids(8);
    std::vector<std::uint8_t> frames(8 * kFrameBytes);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      ids[i] = next_id++;
      for (std::uint64_t b = 0; b < kFrameBytes; ++b)
        frames[i * kFrameBytes + b] = pattern(ids[i], b);
    }
    rc::InsertBatch batch(8);
    batch.add("id", ids).add("frame", frames, {kFrameBytes});
    in_flight.push_back(client.insert_async("frames", batch));
    if (in_flight.size() == 8) {
      for (auto& keys : in_flight)
        keys.get();
      inserted += 64;
      in_flight.clear();
    }
  }
  for (auto& keys : in_flight)
    keys.get();
}

}  // namespace

TEST_CASE("large sampled rows arrive exactly as sampled while inserts overwrite their slots",
          "[large_rows]") {
  const std::string transport = GENERATE("unix", "tcp");
  // A small send buffer makes most replies go out in part and queue behind each other (the
  // copying paths); the default one takes whole replies where the kernel allows it.
  const std::string send_buffer = GENERATE("16384", "default");
  INFO("transport " << transport << ", send buffer " << send_buffer);
  ServerProcess server(ServerOptions{
      send_buffer == "default" ? ""
                               : R"({"limits": {"socket_send_buffer_bytes": )" + send_buffer + "}}",
      {}});
  rc::Client learner(server.address(transport));
  learner.create_table(json_object(R"({"name": "frames", "capacity": 64,
      "fields": [{"name": "id", "dtype": "int64", "shape": []},
                 {"name": "frame", "dtype": "uint8", "shape": [8192]}],
      "sampler": "uniform", "remover": "fifo",
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": 1}})"));

  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> inserted{0};
  std::thread explorer(explore, server.address(transport), std::cref(stop), std::ref(inserted));
  REQUIRE(eventually([&] { return inserted.load() >= 64; }));

  std::uint64_t rows_checked = 0;
  // Batches of 2 rows (16 KiB: written whole at once), 40 rows (320 KiB: more than a socket
  // buffer, written in part and the rest copied); 24 requests in flight, read late.
  for (std::uint64_t n : {2u, 40u, 2u, 40u}) {
    std::vector<std::future<rc::SampleBatch>> samples;
    for (int r = 0; r < 24; ++r)
      samples.push_back(learner.sample_async("frames", n, {.timeout_ms = 30000}));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the inserts move on
    for (auto& future : samples) {
      const rc::SampleBatch sample = future.get();
      REQUIRE(sample.size() == n);
      const auto ids = sample.field("id").as<std::int64_t>();
      const auto frames = sample.field("frame").as<std::uint8_t>();
      for (std::uint64_t row = 0; row < n; ++row) {
        std::uint64_t mismatches = 0;
        for (std::uint64_t b = 0; b < kFrameBytes; ++b) {
          mismatches += frames[row * kFrameBytes + b] != pattern(ids[row], b);
        }
        INFO("row " << row << " of a batch of " << n << ", id " << ids[row]);
        REQUIRE(mismatches == 0);
        ++rows_checked;
      }
    }
  }
  stop = true;
  explorer.join();
  CHECK(rows_checked == 24 * (2 + 40 + 2 + 40));
  CHECK(inserted.load() > 64);  // the table was overwritten while samples were in flight
  CHECK(server.running());
}

}  // namespace replayd::testing
