// Episodic tables through the C++ client against the real server: a random multi-env
// episode stream written with EpisodeWriter, then n-step samples, sequence samples and
// read_steps pages checked exactly against a small reference model of the stream
// (docs/TRAJECTORIES.md: which starts are valid, the return, discount and steps of a
// window, the mask of a sequence), and the errors a user gets for bad requests.
#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "replayd_client/episodes/episode_writer.h"
#include "replayd_client/episodes/episodic_table.h"
#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

enum class End { open, terminated, truncated };

// One written step: obs = {id, env}, next_obs = {id + 0.5, env}, act = 3 * id, rew random.
struct RefStep {
  std::uint64_t episode = 0;
  std::uint32_t position = 0;
  float obs[2] = {0, 0};
  float next_obs[2] = {0, 0};
  std::int64_t act = 0;
  double rew = 0;
  std::uint64_t key = 0;
};

struct RefEpisode {
  std::vector<std::size_t> steps;  // ids of its steps in position order
  End end = End::open;
};

// The stream as written: steps by id (append order) and episodes by server id.
struct Reference {
  std::vector<RefStep> steps;
  std::map<std::uint64_t, RefEpisode> episodes;

  const RefStep& step_of_obs(float id) const {
    const auto index = static_cast<std::size_t>(id);
    REQUIRE(static_cast<float>(index) == id);
    REQUIRE(index < steps.size());
    return steps[index];
  }
  // Valid n-step starts of k (nothing is ever evicted or deleted in these tests).
  std::set<std::size_t> nstep_starts(std::uint64_t k) const {
    std::set<std::size_t> starts;
    for (const auto& [id, episode] : episodes) {
      for (std::size_t p = 0; p < episode.steps.size(); ++p) {
        if (episode.end != End::open || p + k <= episode.steps.size())
          starts.insert(episode.steps[p]);
      }
    }
    return starts;
  }
  std::set<std::size_t> sequence_starts(std::uint64_t length, std::uint64_t stride,
                                        bool pad) const {
    std::set<std::size_t> starts;
    for (const auto& [id, episode] : episodes) {
      for (std::size_t p = 0; p < episode.steps.size(); p += stride) {
        if (p + length <= episode.steps.size() || (pad && episode.end != End::open))
          starts.insert(episode.steps[p]);
      }
    }
    return starts;
  }
};

constexpr const char* kTable = "steps";

boost::json::object steps_table() {
  return rc::episodic_table(
      json_object(R"({"name": "steps", "capacity": 4096, "seed": 3,
      "fields": [{"name": "obs", "dtype": "float32", "shape": [2]},
                 {"name": "act", "dtype": "int64", "shape": []},
                 {"name": "reward", "dtype": "float64", "shape": []},
                 {"name": "next_obs", "dtype": "float32", "shape": [2]}],
      "sampler": "uniform",
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": 1}})"),
      {.reward = "reward", .bootstrap = std::vector<std::string>{"next_obs"}});
}

rc::EpisodeWriterOptions writer_options(std::size_t envs) {
  rc::EpisodeWriterOptions options;
  options.envs = envs;
  options.batch = 7;
  options.max_in_flight = 3;
  options.keep_keys = true;
  return options;
}

// Writes `episodes` random episodes (1..12 steps) interleaved over the writer's envs, ending
// each as terminated or truncated, except the last one of each env, which stays open.
Reference write_stream(rc::EpisodeWriter& writer, std::size_t envs, std::size_t episodes,
                       std::uint64_t seed) {
  std::mt19937_64 random(seed);
  Reference ref;
  std::vector<std::size_t> left(envs, 0);  // steps still to write in env's episode
  std::vector<std::size_t> started(envs, 0);
  std::size_t begun = 0;
  for (std::size_t e = 0; e < envs; ++e) {
    left[e] = 1 + random() % 12;
    ++begun;
  }
  while (true) {
    std::vector<std::size_t> active;
    for (std::size_t e = 0; e < envs; ++e)
      if (left[e] > 0) active.push_back(e);
    if (active.empty()) break;
    const std::size_t env = active[random() % active.size()];
    RefStep step;
    const auto id = static_cast<float>(ref.steps.size());
    step.obs[0] = id;
    step.obs[1] = static_cast<float>(env);
    step.next_obs[0] = id + 0.5F;
    step.next_obs[1] = static_cast<float>(env);
    step.act = 3 * static_cast<std::int64_t>(ref.steps.size());
    step.rew = std::uniform_real_distribution<double>(-1.0, 1.0)(random);
    writer.append(env, {rc::step_value("obs", std::span<const float>(step.obs)),
                        rc::step_value("act", step.act), rc::step_value("reward", step.rew),
                        rc::step_value("next_obs", std::span<const float>(step.next_obs))});
    step.episode = *writer.episode(env);
    RefEpisode& episode = ref.episodes[step.episode];
    step.position = static_cast<std::uint32_t>(episode.steps.size());
    episode.steps.push_back(ref.steps.size());
    ref.steps.push_back(step);
    if (--left[env] > 0) continue;
    if (begun >= episodes) continue;  // the env's last episode stays open
    const bool terminated = random() % 2 == 0;
    writer.end_episode(env, terminated);
    episode.end = terminated ? End::terminated : End::truncated;
    left[env] = 1 + random() % 12;
    ++begun;
  }
  writer.flush();
  std::map<End, std::size_t> ends;
  for (const auto& [id, episode] : ref.episodes)
    ++ends[episode.end];
  REQUIRE(ends[End::open] == envs);  // the stream has every kind of episode
  REQUIRE(ends[End::open] + ends[End::terminated] + ends[End::truncated] == episodes);
  REQUIRE((episodes < 10 || (ends[End::terminated] > 2 && ends[End::truncated] > 2)));
  REQUIRE(writer.keys().size() == ref.steps.size());
  for (std::size_t i = 0; i < ref.steps.size(); ++i)
    ref.steps[i].key = writer.keys()[i];
  return ref;
}

// Checks n-step draws of k against the reference; returns the starts drawn.
std::set<std::size_t> check_nstep(const Reference& ref, const rc::SampleBatch& batch,
                                  std::uint64_t k, double gamma) {
  REQUIRE(batch.nstep() == k);
  REQUIRE(batch.field_count() == 4);
  const auto obs = batch.field("obs").as<float>();
  const auto act = batch.field("act").as<std::int64_t>();
  const auto ret = batch.field("reward").as<double>();
  const auto next_obs = batch.field("next_obs").as<float>();
  const std::size_t valid = ref.nstep_starts(k).size();
  std::set<std::size_t> drawn;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const RefStep& start = ref.step_of_obs(obs[2 * i]);
    const RefEpisode& episode = ref.episodes.at(start.episode);
    const std::size_t left = episode.steps.size() - start.position;
    INFO("draw " << i << ": episode " << start.episode << " position " << start.position << " of "
                 << episode.steps.size() << ", k " << k);
    REQUIRE((episode.end != End::open || left >= k));  // a valid start only
    const std::size_t h = episode.end != End::open && left <= k ? left : k;
    const bool terminal = episode.end == End::terminated && left <= k;
    double expected_return = 0;
    double scale = 1;
    for (std::size_t j = 0; j < h; ++j) {
      expected_return += scale * ref.steps[episode.steps[start.position + j]].rew;
      scale *= gamma;
    }
    const RefStep& last = ref.steps[episode.steps[start.position + h - 1]];
    CHECK(batch.keys()[i] == start.key);
    CHECK(batch.probabilities()[i] == Approx(1.0 / static_cast<double>(valid)));
    CHECK(obs[2 * i + 1] == start.obs[1]);
    CHECK(act[i] == start.act);
    CHECK(ret[i] == Approx(expected_return).margin(1e-12));
    CHECK(batch.steps()[i] == h);
    if (terminal) {
      CHECK(batch.discounts()[i] == 0.0);
    } else {
      CHECK(batch.discounts()[i] == Approx(std::pow(gamma, static_cast<double>(h))));
    }
    CHECK(next_obs[2 * i] == last.next_obs[0]);  // the bootstrap of the window's last step
    CHECK(next_obs[2 * i + 1] == last.next_obs[1]);
    drawn.insert(static_cast<std::size_t>(obs[2 * i]));
  }
  return drawn;
}

// Checks sequence draws against the reference; returns the starts drawn.
std::set<std::size_t> check_sequences(const Reference& ref, const rc::SequenceBatch& batch,
                                      std::uint64_t stride, bool pad) {
  const std::uint64_t burn_in = batch.burn_in();
  const std::uint64_t steps = batch.time_steps();
  const auto mask = batch.mask();
  const auto obs = batch.field("obs").as<float>();
  const auto act = batch.field("act").as<std::int64_t>();
  const auto rew = batch.field("reward").as<double>();
  REQUIRE(batch.field("obs").shape() == std::vector<std::uint64_t>{batch.size(), steps, 2});
  const std::size_t valid = ref.sequence_starts(batch.length(), stride, pad).size();
  std::set<std::size_t> drawn;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::size_t row0 = i * steps;
    REQUIRE(mask[row0 + burn_in] == 1);
    const RefStep& start = ref.step_of_obs(obs[2 * (row0 + burn_in)]);
    const RefEpisode& episode = ref.episodes.at(start.episode);
    INFO("sequence " << i << ": episode " << start.episode << " start " << start.position << " of "
                     << episode.steps.size());
    CHECK(start.position % stride == 0);
    CHECK(batch.keys()[i] == start.key);
    CHECK(batch.probabilities()[i] == Approx(1.0 / static_cast<double>(valid)));
    REQUIRE((start.position + batch.length() <= episode.steps.size() ||
             (pad && episode.end != End::open)));
    for (std::uint64_t t = 0; t < steps; ++t) {
      const std::int64_t position = static_cast<std::int64_t>(start.position) -
                                    static_cast<std::int64_t>(burn_in) +
                                    static_cast<std::int64_t>(t);
      const bool real = position >= 0 && position < static_cast<std::int64_t>(episode.steps.size());
      const std::size_t row = row0 + t;
      CHECK(mask[row] == (real ? 1 : 0));
      if (real) {  // the step of this episode at this position, never another episode's
        const RefStep& step = ref.steps[episode.steps[static_cast<std::size_t>(position)]];
        CHECK(obs[2 * row] == step.obs[0]);
        CHECK(act[row] == step.act);
        CHECK(rew[row] == step.rew);
      } else {
        CHECK(obs[2 * row] == 0.0F);
        CHECK(obs[2 * row + 1] == 0.0F);
        CHECK(act[row] == 0);
        CHECK(rew[row] == 0.0);
      }
    }
    drawn.insert(static_cast<std::size_t>(start.obs[0]));
  }
  return drawn;
}

// Draws enough n-step samples to see every valid start (12288 draws over at most ~300).
void check_all_nstep(rc::Client& client, const Reference& ref, std::uint64_t k, double gamma) {
  rc::NStepOptions options;
  options.nstep = k;
  options.gamma = gamma;
  options.timeout_ms = 0;
  std::vector<std::future<rc::SampleBatch>> futures;
  for (int r = 0; r < 3; ++r)
    futures.push_back(client.sample_nstep_async(kTable, 4096, options));
  std::set<std::size_t> drawn;
  for (auto& future : futures)
    drawn.merge(check_nstep(ref, future.get(), k, gamma));
  CHECK(drawn == ref.nstep_starts(k));
}

void check_all_sequences(rc::Client& client, const Reference& ref, std::uint64_t length,
                         std::uint64_t stride, std::uint64_t burn_in, bool pad) {
  rc::SequenceOptions options;
  options.stride = stride;
  options.burn_in = burn_in;
  options.pad = pad;
  options.timeout_ms = 0;
  std::vector<std::future<rc::SequenceBatch>> futures;
  for (int r = 0; r < 3; ++r)
    futures.push_back(client.sample_sequences_async(kTable, 2048, length, options));
  std::set<std::size_t> drawn;
  for (auto& future : futures) {
    const rc::SequenceBatch batch = future.get();
    REQUIRE(batch.length() == length);
    REQUIRE(batch.burn_in() == burn_in);
    drawn.merge(check_sequences(ref, batch, stride, pad));
  }
  CHECK(drawn == ref.sequence_starts(length, stride, pad));
}

}  // namespace

TEST_CASE("n-step samples of a written episode stream match the reference exactly", "[episodes]") {
  const std::string transport = GENERATE("unix", "tcp");
  INFO("transport " << transport);
  ServerProcess server;
  rc::Client client(server.address(transport));
  client.create_table(steps_table());
  rc::EpisodeWriter writer(server.address(transport), kTable, writer_options(3));
  CHECK(writer.staged() == (transport == "unix"));  // the plane: Unix sockets only
  Reference ref = write_stream(writer, 3, 40, 11);
  REQUIRE(table_size(client, kTable) == ref.steps.size());

  for (const std::uint64_t k : std::array<std::uint64_t, 3>{1, 3, 5}) {
    INFO("k = " << k);
    check_all_nstep(client, ref, k, 0.9);
  }
  check_all_nstep(client, ref, 4, 1.0);
  check_all_nstep(client, ref, 2, 0.0);

  // Closing the writer ends its open episodes as truncated: their short windows become
  // valid starts, bootstrapped (discount gamma^h, not 0).
  writer.close();
  for (auto& [id, episode] : ref.episodes)
    if (episode.end == End::open) episode.end = End::truncated;
  check_all_nstep(client, ref, 5, 0.9);
}

TEST_CASE("the episode writer stores the same steps through a staging arena or the socket",
          "[episodes][shm]") {
  // staged: the plane; not asked: shared_memory off; refused: the server's staging limit
  // below one arena, so the writer falls back to the socket.
  const std::string path = GENERATE("staged", "not asked", "refused");
  INFO("path " << path);
  ServerOptions server_options;
  if (path == "refused")
    server_options.config_json = R"({"limits": {"max_staging_bytes_per_connection": 256}})";
  ServerProcess server(server_options);
  rc::Client client(server.unix_address());
  client.create_table(steps_table());
  rc::EpisodeWriterOptions options = writer_options(3);
  options.client.shared_memory = path != "not asked";
  rc::EpisodeWriter writer(server.unix_address(), kTable, options);
  CHECK(writer.staged() == (path == "staged"));
  const Reference ref = write_stream(writer, 3, 40, 5);
  writer.close();
  std::size_t stored = 0;
  client.read_all_steps(kTable, [&](const rc::StepPage& page) {
    const auto obs = page.field("obs").as<float>();
    const auto act = page.field("act").as<std::int64_t>();
    const auto rew = page.field("reward").as<double>();
    const auto next_obs = page.field("next_obs").as<float>();
    for (std::size_t i = 0; i < page.size(); ++i, ++stored) {
      const RefStep& step = ref.step_of_obs(obs[2 * i]);
      INFO("step " << obs[2 * i]);
      CHECK(page.episodes()[i] == step.episode);
      CHECK(obs[2 * i + 1] == step.obs[1]);
      CHECK(act[i] == step.act);
      CHECK(rew[i] == step.rew);
      CHECK(next_obs[2 * i] == step.next_obs[0]);
      CHECK(next_obs[2 * i + 1] == step.next_obs[1]);
    }
  });
  CHECK(stored == ref.steps.size());
}

TEST_CASE("sequence samples hold consecutive steps of one episode with the right mask",
          "[episodes]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(steps_table());
  rc::EpisodeWriter writer(server.unix_address(), kTable, writer_options(4));
  const Reference ref = write_stream(writer, 4, 40, 29);

  SECTION("without padding") {
    check_all_sequences(client, ref, 4, 1, 0, false);
  }
  SECTION("with burn-in, stride and padding") {
    check_all_sequences(client, ref, 4, 2, 3, true);
  }
  SECTION("with burn-in, without padding") {
    check_all_sequences(client, ref, 3, 3, 2, false);
  }
}

TEST_CASE("read_steps pages return every stored step once, in the order written", "[episodes]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(steps_table());
  rc::EpisodeWriter writer(server.unix_address(), kTable, writer_options(2));
  const Reference ref = write_stream(writer, 2, 30, 5);

  std::size_t next = 0;
  std::uint64_t last_sequence = 0;
  std::size_t pages = 0;
  const std::uint64_t visited = client.read_all_steps(
      kTable,
      [&](const rc::StepPage& page) {
        ++pages;
        REQUIRE(page.size() <= 50);
        const auto obs = page.field("obs").as<float>();
        for (std::size_t i = 0; i < page.size(); ++i) {
          REQUIRE(next < ref.steps.size());
          const RefStep& step = ref.steps[next++];
          CHECK(page.keys()[i] == step.key);
          CHECK(page.episodes()[i] == step.episode);
          CHECK(page.positions()[i] == step.position);
          CHECK(page.sequences()[i] > last_sequence);
          last_sequence = page.sequences()[i];
          CHECK(obs[2 * i] == step.obs[0]);
          CHECK(page.field("act").as<std::int64_t>()[i] == step.act);
          CHECK(page.field("reward").as<double>()[i] == step.rew);
        }
        CHECK(page.next() == last_sequence);
      },
      50);
  CHECK(visited == ref.steps.size());
  CHECK(next == ref.steps.size());
  CHECK(pages == (ref.steps.size() + 49) / 50);
  CHECK(client.read_steps(kTable, 50, last_sequence).empty());
}

TEST_CASE("the episode writer keeps max_in_flight appends waiting on the server without blocking",
          "[episodes]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  // Appends of one step each: two proceed, then each waits for a sample (diff <= 2).
  auto description = steps_table();
  description["rate_limiter"] = json_object(
      R"({"kind": "custom", "samples_per_insert": 1, "min_size_to_sample": 1, "max_diff": 2})");
  client.create_table(description);
  rc::EpisodeWriterOptions options = writer_options(1);
  options.batch = 1;
  options.max_in_flight = 3;
  options.timeout_ms = 60000;  // a writer that waited for each reply would fail, not hang
  rc::EpisodeWriter writer(server.unix_address(), kTable, options);
  // Staged: the waiting appends' rows stay in their arena slots until admitted.
  REQUIRE(writer.staged());
  std::int64_t act = 0;
  const double rew = 1;
  const std::vector<float> pair{0, 0};
  const auto step = [&] {
    ++act;
    writer.append(0, {rc::step_value("obs", pair), rc::step_value("act", act),
                      rc::step_value("reward", rew), rc::step_value("next_obs", pair)});
  };
  for (int i = 0; i < 5; ++i)
    step();  // returns at once: the last three wait on the server
  CHECK(eventually([&] { return table_stat(client, kTable, "waiting", "inserts") == 3; }));
  CHECK(table_size(client, kTable) == 2);

  // A fourth request in flight would exceed max_in_flight: the append waits for the oldest
  // reply, which a sample releases.
  auto sixth = std::async(std::launch::async, step);
  rc::NStepOptions one;
  one.nstep = 1;
  CHECK(client.sample_nstep(kTable, 1, one).size() == 1);
  REQUIRE(ready_soon(sixth));
  sixth.get();
  CHECK(eventually([&] { return table_stat(client, kTable, "waiting", "inserts") == 3; }));

  client.sample_nstep(kTable, 4, one);  // room for every waiting append
  writer.flush();
  CHECK(table_size(client, kTable) == 6);
  CHECK(writer.keys().size() == 6);
  // Each waiting append stored its own step: no slot was written again before its reply.
  std::vector<std::int64_t> stored;
  client.read_all_steps(kTable, [&](const rc::StepPage& page) {
    const auto acts = page.field("act").as<std::int64_t>();
    stored.insert(stored.end(), acts.begin(), acts.end());
  });
  CHECK(stored == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("the episode writer sends a partial batch whose first step is max_delay old",
          "[episodes]") {
  using namespace std::chrono_literals;
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(steps_table());
  rc::EpisodeWriterOptions options = writer_options(2);
  options.batch = 64;
  options.max_delay = 50ms;
  std::int64_t act = 0;
  const double rew = 1;
  const std::vector<float> pair{0, 0};
  const auto step = [&](rc::EpisodeWriter& writer, std::size_t env) {
    ++act;
    writer.append(env, {rc::step_value("obs", pair), rc::step_value("act", act),
                        rc::step_value("reward", rew), rc::step_value("next_obs", pair)});
  };
  rc::EpisodeWriter writer(server.unix_address(), kTable, options);
  step(writer, 0);
  std::this_thread::sleep_for(100ms);
  CHECK(table_size(client, kTable) == 0);  // an append sends it, not a timer
  step(writer, 1);                         // finds step 0 older than max_delay: sends both
  CHECK(writer.buffered() == 0);
  CHECK(eventually([&] { return table_size(client, kTable) == 2; }));

  options.max_delay = std::nullopt;  // only full batches (and end_episode, flush, close)
  rc::EpisodeWriter patient(server.unix_address(), kTable, options);
  step(patient, 0);
  std::this_thread::sleep_for(100ms);
  step(patient, 0);
  CHECK(patient.buffered() == 2);
  patient.flush();
  CHECK(table_size(client, kTable) == 4);

  options.max_delay = -1ms;
  CHECK_THROWS_WITH(rc::EpisodeWriter(server.unix_address(), kTable, options),
                    Catch::Contains("max_delay must be >= 0"));
}

TEST_CASE("bad episodic requests fail with an Error naming the problem", "[episodes]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(steps_table());
  rc::EpisodeWriter writer(server.unix_address(), kTable, writer_options(2));
  write_stream(writer, 2, 4, 1);

  const auto expect_error = [](auto call, rc::ErrorCode code, const std::string& word) {
    try {
      call();
      FAIL("expected an Error mentioning " << word);
    } catch (const rc::Error& e) {
      INFO(e.message());
      CHECK(e.code() == code);
      CHECK_THAT(e.message(), Catch::Matchers::Contains(word));
    }
  };
  const auto nstep = [&](std::uint64_t k, double gamma) {
    rc::NStepOptions options;
    options.nstep = k;
    options.gamma = gamma;
    return [&client, options] { client.sample_nstep(kTable, 4, options); };
  };
  expect_error(nstep(0, 0.9), rc::ErrorCode::invalid_argument, "nstep");
  expect_error(nstep(5000, 0.9), rc::ErrorCode::invalid_argument, "nstep");
  expect_error(nstep(3, 1.5), rc::ErrorCode::invalid_argument, "gamma");
  expect_error(nstep(3, -0.1), rc::ErrorCode::invalid_argument, "gamma");
  expect_error(nstep(3, std::nan("")), rc::ErrorCode::invalid_argument, "gamma");
  CHECK(client.sample(kTable, 4).size() == 4);  // without nstep: its steps as items
  expect_error([&] { client.sample_sequences(kTable, 4, 0); }, rc::ErrorCode::invalid_argument,
               "length");
  expect_error([&] { client.sample_nstep("missing", 4); }, rc::ErrorCode::not_found, "missing");

  const std::int64_t act = 1;
  const double rew = 0.5;
  const std::vector<float> pair{1, 2};
  const auto full_step = [&](std::size_t env) {
    writer.append(env, {rc::step_value("obs", pair), rc::step_value("act", act),
                        rc::step_value("reward", rew), rc::step_value("next_obs", pair)});
  };
  full_step(1);
  REQUIRE(writer.buffered() == 1);
  expect_error([&] { full_step(2); }, rc::ErrorCode::invalid_argument, "env");
  expect_error(
      [&] {
        writer.append(0, {rc::step_value("obs", pair), rc::step_value("act", act),
                          rc::step_value("reward", rew)});
      },
      rc::ErrorCode::invalid_argument, "next_obs");
  expect_error(
      [&] {
        const float wrong = 0.5F;
        writer.append(0, {rc::step_value("obs", pair), rc::step_value("act", act),
                          rc::step_value("reward", wrong), rc::step_value("next_obs", pair)});
      },
      rc::ErrorCode::invalid_argument, "reward");
  CHECK(writer.buffered() == 1);  // a refused step buffers nothing

  // Episodes belong to the connection that opened them.
  writer.flush();
  const std::uint64_t foreign = *writer.episode(0);
  expect_error([&] { client.end_episode(kTable, foreign); }, rc::ErrorCode::invalid_argument,
               std::to_string(foreign));

  // A pipelined append's error is thrown by the call that collects its reply.
  client.drop_table(kTable);
  full_step(0);
  expect_error([&] { writer.flush(); }, rc::ErrorCode::not_found, kTable);

  client.create_table(json_object(R"({"name": "flat", "capacity": 8,
      "fields": [{"name": "x", "dtype": "int64", "shape": []}]})"));
  expect_error([&] { rc::EpisodeWriter(server.unix_address(), "flat"); },
               rc::ErrorCode::invalid_argument, "not episodic");
}

}  // namespace replayd::testing
