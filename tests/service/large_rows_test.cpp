// Large fields are written to the socket straight from the table's rows. A row must reach
// the client exactly as it was when sampled, although inserts overwrite slots all the time
// while replies wait for a slow reader (the server then copies what the socket did not
// take). Every sampled frame is checked against the pattern of its item's id.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "replayd_client/episodes/episode_writer.h"
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
    const std::vector<float> rews(8, 0.0f);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      ids[i] = next_id++;
      for (std::uint64_t b = 0; b < kFrameBytes; ++b)
        frames[i * kFrameBytes + b] = pattern(ids[i], b);
    }
    rc::InsertBatch batch(8);
    batch.add("id", ids).add("frame", frames, {kFrameBytes}).add("rew", rews);
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

// The same as steps of an episodic table: episodes of 16 steps, until `stop`.
void explore_steps(const std::string& address, const std::atomic<bool>& stop,
                   std::atomic<std::int64_t>& inserted) {
  rc::EpisodeWriterOptions options;
  options.batch = 8;
  rc::EpisodeWriter writer(address, "frames", options);
  std::vector<std::uint8_t> frame(kFrameBytes);
  const float rew = 0;
  for (std::int64_t id = 0; !stop.load(); ++id) {
    for (std::uint64_t b = 0; b < kFrameBytes; ++b)
      frame[b] = pattern(id, b);
    writer.append(
        0, {rc::step_value("id", id), rc::step_value("frame", frame), rc::step_value("rew", rew)});
    if (id % 16 == 15) writer.end_episode(0, false);
    if (id % 64 == 63) {
      writer.flush();
      inserted += 64;
    }
  }
  writer.flush();
}

}  // namespace

TEST_CASE("large sampled rows arrive exactly as sampled while inserts overwrite their slots",
          "[large_rows]") {
  // Items of a plain table, and steps of an episodic one (n-step samples view the same
  // rows, sample_nstep.cpp).
  const bool steps = GENERATE(false, true);
  const std::string transport = GENERATE("unix", "tcp");
  // A small send buffer makes most replies go out in part and queue behind each other (the
  // copying paths); the default one takes whole replies where the kernel allows it.
  const std::string send_buffer = GENERATE("16384", "default");
  INFO("transport " << transport << ", send buffer " << send_buffer << ", steps " << steps);
  ServerProcess server(ServerOptions{
      send_buffer == "default" ? ""
                               : R"({"limits": {"socket_send_buffer_bytes": )" + send_buffer + "}}",
      {}});
  rc::Client learner(server.address(transport));
  learner.create_table(json_object(std::string(R"({"name": "frames", "capacity": 64,
      "fields": [{"name": "id", "dtype": "int64", "shape": []},
                 {"name": "frame", "dtype": "uint8", "shape": [8192]},
                 {"name": "rew", "dtype": "float32", "shape": []}],
      "sampler": "uniform", "remover": "fifo",
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": 1})") +
                                   (steps ? R"(, "episodic": true})" : "}")));

  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> inserted{0};
  std::thread explorer(steps ? explore_steps : explore, server.address(transport), std::cref(stop),
                       std::ref(inserted));
  REQUIRE(eventually([&] { return inserted.load() >= 64; }));

  std::uint64_t rows_checked = 0;
  // Batches of 2 rows (16 KiB: written whole at once), 40 rows (320 KiB: more than a socket
  // buffer, written in part and the rest copied); 24 requests in flight, read late.
  for (std::uint64_t n : {2u, 40u, 2u, 40u}) {
    std::vector<std::future<rc::SampleBatch>> samples;
    for (int r = 0; r < 24; ++r) {
      samples.push_back(steps ? learner.sample_nstep_async("frames", n, {.timeout_ms = 30000})
                              : learner.sample_async("frames", n, {.timeout_ms = 30000}));
    }
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
