// replayd_episode_writer_bench: steps per second of one C++ EpisodeWriter appending Atari-
// sized steps (W2's fields: two 4x84x84 uint8 stacks, an action, a reward, a done flag:
// 56,457 bytes) to an episodic table, through a staging arena (the shared-memory plane)
// and through the socket, alternating in every repetition (docs/BENCHMARKS.md). Episodes
// of 100 steps, each ended as terminated; the steps cycle through 64 distinct random ones.
// A run ends when close() has every reply, so the time includes the server storing them.
// One unmeasured run of each path first fills the table (its pages' first touch).
//
//   taskset -c 0 build/service/replayd --unix /tmp/r.sock --tcp "" --metrics "" &
//   taskset -c 1 build/bench/episodes/replayd_episode_writer_bench --address unix:///tmp/r.sock
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "replayd_client/client.h"
#include "replayd_client/episodes/episode_writer.h"
#include "replayd_client/episodes/episodic_table.h"

namespace {
namespace rc = replayd::client;

constexpr const char* kTable = "episode_writer_bench";
constexpr std::size_t kStack = 4 * 84 * 84;
constexpr std::size_t kPool = 64;
constexpr std::size_t kEpisodeSteps = 100;

struct Step {
  std::vector<std::uint8_t> obs, next_obs;
  std::int32_t act = 0;
  float rew = 0;
  std::uint8_t done = 0;
};

std::vector<Step> random_steps(std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<Step> steps(kPool);
  for (Step& step : steps) {
    step.obs.resize(kStack);
    step.next_obs.resize(kStack);
    for (std::size_t i = 0; i < kStack; ++i) {
      step.obs[i] = static_cast<std::uint8_t>(random());
      step.next_obs[i] = static_cast<std::uint8_t>(random());
    }
    step.act = static_cast<std::int32_t>(random() % 18);
    step.rew = static_cast<float>(random() % 3) - 1.0F;
  }
  return steps;
}

void create_table(const std::string& address, std::uint64_t capacity) {
  rc::ClientOptions options;
  options.shared_memory = false;
  rc::Client client(address, options);
  try {
    client.drop_table(kTable);
  } catch (const rc::Error& e) {
    if (e.code() != rc::ErrorCode::not_found) throw;
  }
  boost::json::object description{
      {"name", kTable}, {"capacity", capacity}, {"sampler", "uniform"}, {"remover", "fifo"}};
  boost::json::array fields;
  const auto field = [&](const char* name, const char* dtype, boost::json::array shape) {
    fields.push_back(boost::json::object{{"name", name}, {"dtype", dtype}, {"shape", shape}});
  };
  field("obs", "uint8", {4, 84, 84});
  field("act", "int32", {});
  field("rew", "float32", {});
  field("next_obs", "uint8", {4, 84, 84});
  field("done", "uint8", {});
  description["fields"] = fields;
  description["rate_limiter"] =
      boost::json::object{{"kind", "min_size"}, {"min_size_to_sample", 1}};
  client.create_table(rc::episodic_table(
      description, {.reward = "rew", .bootstrap = std::vector<std::string>{"next_obs"}}));
}

// Steps per second of one writer appending `count` steps, close() included.
double run(const std::string& address, const std::vector<Step>& steps, std::size_t count,
           bool staged, const rc::EpisodeWriterOptions& base) {
  rc::EpisodeWriterOptions options = base;
  options.client.shared_memory = staged;
  const auto start = std::chrono::steady_clock::now();
  rc::EpisodeWriter writer(address, kTable, options);
  if (writer.staged() != staged) {
    std::fprintf(stderr, "the writer is %s, not %s as asked\n",
                 writer.staged() ? "staged" : "not staged", staged ? "staged" : "not staged");
    std::exit(1);
  }
  for (std::size_t i = 0; i < count; ++i) {
    const Step& step = steps[i % steps.size()];
    writer.append(0, {rc::step_value("obs", step.obs), rc::step_value("act", step.act),
                      rc::step_value("rew", step.rew), rc::step_value("next_obs", step.next_obs),
                      rc::step_value("done", step.done)});
    if ((i + 1) % kEpisodeSteps == 0) writer.end_episode(0, /*terminated=*/true);
  }
  writer.close();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return static_cast<double>(count) / took.count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Steps/s of one C++ EpisodeWriter, staged against the socket");
  std::string address;
  std::size_t steps_per_run = 20000;
  int reps = 5;
  rc::EpisodeWriterOptions options;
  options.batch = 64;
  options.max_in_flight = 8;
  app.add_option("--address", address, "the server, unix://PATH")->required();
  app.add_option("--steps", steps_per_run, "steps per run (default 20000)");
  app.add_option("--reps", reps, "repetitions, each running both paths (default 5)");
  app.add_option("--batch", options.batch, "steps per append_steps (default 64)");
  app.add_option("--max-in-flight", options.max_in_flight, "requests in flight (default 8)");
  CLI11_PARSE(app, argc, argv);

  const std::vector<Step> steps = random_steps(7);
  create_table(address, 10'000);
  for (const bool path : {true, false})
    run(address, steps, 10'000, path, options);
  std::vector<double> staged_rates, socket_rates, ratios;
  for (int rep = 0; rep < reps; ++rep) {
    // Which path goes first alternates, so a drift of the machine favours neither.
    const bool staged_first = rep % 2 == 0;
    double staged = 0, socket = 0;
    for (const bool path : {staged_first, !staged_first}) {
      (path ? staged : socket) = run(address, steps, steps_per_run, path, options);
    }
    staged_rates.push_back(staged);
    socket_rates.push_back(socket);
    ratios.push_back(staged / socket);
    std::printf("rep %d: staged %.0f steps/s, socket %.0f steps/s, ratio %.3f\n", rep + 1, staged,
                socket, staged / socket);
  }
  std::printf(
      "medians of %d (%zu steps of %zu bytes per run, batch %zu, %zu in flight): staged %.0f "
      "steps/s (%.2f GB/s), socket %.0f steps/s; staged / socket per repetition %.3f "
      "(%.3f-%.3f)\n",
      reps, steps_per_run, 2 * kStack + 9, options.batch, options.max_in_flight,
      median(staged_rates), median(staged_rates) * (2 * kStack + 9) / 1e9, median(socket_rates),
      median(ratios), *std::min_element(ratios.begin(), ratios.end()),
      *std::max_element(ratios.begin(), ratios.end()));
  return 0;
}
