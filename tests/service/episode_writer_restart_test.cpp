// The C++ EpisodeWriter across a lost connection (a server restart, against the real
// binary): it never stores later steps under a silently new episode and never turns a
// termination into a truncation; the call that finds the connection gone throws
// Error(connection_lost) saying which steps were not stored, and the writer's next steps
// start a new episode on a new connection (docs/TRAJECTORIES.md, "Writers and lost
// connections").
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "replayd_client/episodes/episode_writer.h"
#include "replayd_client/episodes/episodic_table.h"
#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

constexpr const char* kTable = "t";

boost::json::object restart_table() {
  return rc::episodic_table(json_object(R"({"name": "t", "capacity": 1000,
      "fields": [{"name": "obs", "dtype": "float32", "shape": [2]},
                 {"name": "rew", "dtype": "float32", "shape": []}],
      "sampler": "uniform",
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": 1}})"),
                            {.reward = "rew", .bootstrap = std::vector<std::string>{}});
}

// A server whose snapshots survive restart().
ServerOptions persistent() {
  ServerOptions options;
  options.data_dir = true;
  return options;
}

// Appends step t (obs = {t, t}, rew = t) to env 0.
void append_step(rc::EpisodeWriter& writer, float t) {
  const float obs[2] = {t, t};
  writer.append(0, {rc::step_value("obs", std::span<const float>(obs)), rc::step_value("rew", t)});
}

// {episode id: its stored steps' obs[0], in position order} of every stored step.
std::map<std::uint64_t, std::vector<float>> stored_episodes(rc::Client& client) {
  std::map<std::uint64_t, std::vector<float>> episodes;
  client.read_all_steps(kTable, [&](const rc::StepPage& page) {
    const auto obs = page.field("obs").as<float>();
    for (std::size_t i = 0; i < page.size(); ++i)
      episodes[page.episodes()[i]].push_back(obs[2 * i]);
  });
  return episodes;
}

std::vector<float> steps_from(float first, float last) {
  std::vector<float> steps;
  for (float t = first; t <= last; ++t)
    steps.push_back(t);
  return steps;
}

// What the writer throws for a lost connection; fails the test if it throws nothing else.
template <typename Call>
std::string lost_report(Call call) {
  try {
    call();
  } catch (const rc::Error& e) {
    REQUIRE(e.code() == rc::ErrorCode::connection_lost);
    return e.message();
  }
  FAIL("expected Error(connection_lost)");
  return {};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE(
    "a restart mid-episode makes the writer say which steps were not stored and start "
    "a new episode") {
  ServerProcess server(persistent());
  rc::Client client(server.unix_address());
  client.create_table(restart_table());
  rc::EpisodeWriterOptions options;
  options.batch = 4;
  rc::EpisodeWriter writer(server.unix_address(), kTable, options);
  CHECK(writer.staged());        // a Unix socket of the same uid: through a staging arena
  for (float t = 0; t < 8; ++t)  // two batches of 4, sent and confirmed
    append_step(writer, t);
  writer.flush();
  const std::uint64_t first_episode = *writer.episode(0);
  server.restart();  // SIGTERM: the final snapshot keeps the 8 steps

  const std::string report = lost_report([&] {
    for (float t = 8; t < 24; ++t)
      append_step(writer, t);
    writer.end_episode(0, /*terminated=*/true);
    writer.flush();
  });
  INFO(report);
  CHECK(contains(report, "the connection was lost"));
  CHECK(contains(report, "4 steps of episode " + std::to_string(first_episode) + " were not sent"));
  CHECK(contains(report, "the next append of an env starts a new episode"));
  CHECK_FALSE(writer.episode(0));  // the lost episode is forgotten

  rc::Client after(server.unix_address());
  // Nothing after the loss went into the episode of steps 0-7, nor into a new one unsaid.
  auto episodes = stored_episodes(after);
  REQUIRE(episodes.size() == 1);
  CHECK(episodes.at(first_episode) == steps_from(0, 7));

  // The writer goes on: its next steps are a new episode, ended as the user says.
  for (float t = 100; t < 103; ++t)
    append_step(writer, t);
  CHECK(writer.staged());  // a staging arena of the new connection
  const std::uint64_t second_episode = *writer.episode(0);
  CHECK(second_episode != first_episode);
  writer.end_episode(0, /*terminated=*/true);
  writer.close();
  episodes = stored_episodes(after);
  REQUIRE(episodes.size() == 2);
  CHECK(episodes.at(first_episode) == steps_from(0, 7));
  CHECK(episodes.at(second_episode) == steps_from(100, 102));
  // The new episode's termination is stored as such: its last step bootstraps nothing.
  rc::NStepOptions nstep;
  nstep.nstep = 5;
  nstep.gamma = 0.5;
  const rc::SampleBatch sample = after.sample_nstep(kTable, 256, nstep);
  const auto obs = sample.field("obs").as<float>();
  std::size_t last_steps = 0;
  for (std::size_t i = 0; i < sample.size(); ++i) {
    if (obs[2 * i] != 102.0F) continue;
    ++last_steps;
    CHECK(sample.discounts()[i] == 0.0);
  }
  CHECK(last_steps > 0);
}

TEST_CASE(
    "a termination buffered when the connection dies is reported as not stored, never "
    "as a truncation") {
  ServerProcess server(persistent());
  rc::Client client(server.unix_address());
  client.create_table(restart_table());
  rc::EpisodeWriterOptions options;
  options.batch = 64;
  rc::EpisodeWriter writer(server.unix_address(), kTable, options);
  for (float t = 0; t < 5; ++t)
    append_step(writer, t);
  writer.flush();
  const std::string episode = std::to_string(*writer.episode(0));
  server.restart();
  append_step(writer, 5);
  writer.end_episode(0, /*terminated=*/true);
  const std::string report = lost_report([&] { writer.flush(); });
  INFO(report);
  CHECK(contains(report, "1 steps of episode " + episode + " were not sent"));
  CHECK(contains(report, "the end of episode " + episode +
                             " (terminated) was not sent: the server ends it as truncated"));
  writer.close();  // nothing left to report or to end
}

// Two requests of 2 steps are stored (the limiter admits 4 steps before a sample), the next
// two wait for the rate limiter on the server: `episode` holds the writer's episode.
void write_until_parked(ServerProcess& server, rc::EpisodeWriter& writer, std::string& episode) {
  rc::Client client(server.unix_address());
  for (float t = 0; t < 8; ++t)  // four requests sent; their replies are not collected
    append_step(writer, t);
  episode = std::to_string(*writer.episode(0));
  REQUIRE(eventually([&] { return table_stat(client, kTable, "waiting", "inserts") == 2; }));
  REQUIRE(table_size(client, kTable) == 4);
}

boost::json::object limited_table() {
  auto description = restart_table();
  description["rate_limiter"] = json_object(
      R"({"kind": "custom", "samples_per_insert": 1, "min_size_to_sample": 2, "max_diff": 4})");
  return description;
}

rc::EpisodeWriterOptions small_batches() {
  rc::EpisodeWriterOptions options;
  options.batch = 2;
  options.max_in_flight = 64;
  return options;
}

TEST_CASE("requests in flight when the server crashes are reported as sent but not confirmed") {
  ServerProcess server;
  rc::Client(server.unix_address()).create_table(limited_table());
  rc::EpisodeWriter writer(server.unix_address(), kTable, small_batches());
  std::string episode;
  write_until_parked(server, writer, episode);
  server.restart(SIGKILL);  // no reply to the waiting requests
  const std::string report = lost_report([&] { writer.flush(); });
  INFO(report);
  CHECK(contains(report,
                 "sent but not confirmed (the server may or may not have stored them): "
                 "4 steps of episode " +
                     episode + "."));
  CHECK_FALSE(contains(report, "were not sent"));
  CHECK_FALSE(writer.episode(0));
}

TEST_CASE("requests the stopping server refuses are reported as not stored") {
  ServerProcess server;
  rc::Client(server.unix_address()).create_table(limited_table());
  rc::EpisodeWriter writer(server.unix_address(), kTable, small_batches());
  std::string episode;
  write_until_parked(server, writer, episode);
  server.restart();  // SIGTERM: the waiting requests are answered shutting_down
  const std::string report = lost_report([&] { writer.flush(); });
  INFO(report);
  CHECK(contains(report, "4 steps of episode " + episode +
                             " were refused by the server (not "
                             "stored)"));
  CHECK_FALSE(contains(report, "not confirmed"));
  CHECK_FALSE(writer.episode(0));
}

}  // namespace replayd::testing
