// Episodic tables over three real servers through ShardedClient: each episode stays on the
// shard chosen round-robin when it opened, no window mixes shards or episodes, and n-step
// and sequence samples are drawn from the union exactly as one table would draw them
// (chi-square against the exact distribution of valid starts, exact probabilities and
// weights), for uniform tables and for prioritized ones whose window masses differ from
// their tables' masses.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "replayd_client/episodes/episodic_table.h"
#include "replayd_client/sharded/shard_keys.h"
#include "replayd_client/sharded/sharded_client.h"
#include "replayd_client/sharded/sharded_episode_writer.h"
#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

// Episode j (written one after another by one env) has kLengths[j] steps.
const std::vector<std::size_t> kLengths{2, 5, 9, 3, 1, 4};
// 99.9% quantiles of the chi-square distribution by degrees of freedom.
const std::map<std::size_t, double> kChiSquare999{{12, 32.909}, {21, 46.797}, {23, 49.728}};

struct Shards {
  ServerProcess servers[3];
  std::vector<std::string> addresses{servers[0].unix_address(), servers[1].unix_address(),
                                     servers[2].unix_address()};
  rc::ShardedClient client{addresses, {}, /*seed=*/5};
};

boost::json::object episodic(std::string_view name, bool prioritized) {
  auto description = json_object(R"({"capacity": 300, "seed": 2,
      "fields": [{"name": "obs", "dtype": "float32", "shape": [2]},
                 {"name": "rew", "dtype": "float32", "shape": []},
                 {"name": "next_obs", "dtype": "float32", "shape": [2]}],
      "rate_limiter": {"kind": "min_size", "min_size_to_sample": 1}})");
  description["name"] = name;
  if (prioritized) {
    description["sampler"] =
        boost::json::object{{"kind", "prioritized"}, {"priority_exponent", 1.0}};
  }
  return rc::episodic_table(std::move(description));
}

// Step `position` of episode `episode`: obs {episode, position}, next_obs one position on.
void append(rc::ShardedEpisodeWriter& writer, std::size_t env, std::size_t episode,
            std::size_t position) {
  const std::vector<float> obs{static_cast<float>(episode), static_cast<float>(position)};
  const std::vector<float> next{static_cast<float>(episode), static_cast<float>(position + 1)};
  const float rew = 1;
  writer.append(env, {rc::step_value("obs", obs), rc::step_value("rew", rew),
                      rc::step_value("next_obs", next)});
}

// Writes the kLengths episodes with one env, ending each as terminated except, with
// `leave_last_open`, the last one; returns each episode's shard.
std::vector<std::size_t> write(rc::ShardedEpisodeWriter& writer, bool leave_last_open = false) {
  std::vector<std::size_t> shard_of;
  for (std::size_t episode = 0; episode < kLengths.size(); ++episode) {
    for (std::size_t position = 0; position < kLengths[episode]; ++position)
      append(writer, 0, episode, position);
    shard_of.push_back(writer.shard_of(0).value());
    if (!leave_last_open || episode + 1 < kLengths.size()) writer.end_episode(0);
  }
  writer.flush();
  return shard_of;
}

rc::EpisodeWriterOptions writer_options(std::size_t envs = 1) {
  rc::EpisodeWriterOptions options;
  options.envs = envs;
  options.batch = 3;
  options.keep_keys = true;
  return options;
}

using Start = std::pair<std::size_t, std::size_t>;  // (episode, position)

// Valid starts of windows of `length` steps: the whole window stored, or with `pad` (and
// for n-step windows) ended early by the end of an ended episode.
std::vector<Start> starts_of(std::size_t length, bool pad, bool last_open = false) {
  std::vector<Start> starts;
  for (std::size_t j = 0; j < kLengths.size(); ++j) {
    const bool ended = !(last_open && j + 1 == kLengths.size());
    for (std::size_t p = 0; p < kLengths[j]; ++p) {
      if (p + length <= kLengths[j] || (pad && ended)) starts.emplace_back(j, p);
    }
  }
  return starts;
}

// Priority of step (episode j, position p) in the prioritized tables.
double priority_of(const Start& start) {
  return 1.0 + static_cast<double>(start.second) + 3.0 * static_cast<double>(start.first);
}

// Exact probability of each start: uniform, or by priority.
std::vector<double> exact_distribution(const std::vector<Start>& starts, bool prioritized) {
  std::vector<double> exact;
  for (const auto& start : starts)
    exact.push_back(prioritized ? priority_of(start) : 1.0);
  const double total = std::accumulate(exact.begin(), exact.end(), 0.0);
  for (double& p : exact)
    p /= total;
  return exact;
}

// Gives every stored step of the table priority_of(its episode, position).
void set_priorities(rc::ShardedClient& client, std::string_view table) {
  std::vector<std::uint64_t> keys;
  std::vector<double> priorities;
  client.read_all_steps(table, [&](const rc::StepPage& page) {
    const auto obs = page.field("obs").as<float>();
    for (std::size_t i = 0; i < page.size(); ++i) {
      keys.push_back(page.keys()[i]);
      priorities.push_back(priority_of(
          {static_cast<std::size_t>(obs[2 * i]), static_cast<std::size_t>(obs[2 * i + 1])}));
    }
  });
  REQUIRE(client.update_priorities(table, keys, priorities).applied == keys.size());
}

double chi_square(const std::vector<double>& counts, const std::vector<double>& probabilities) {
  const double draws = std::accumulate(counts.begin(), counts.end(), 0.0);
  double statistic = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double expected = probabilities[i] * draws;
    statistic += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return statistic;
}

// Tallies one union sample's rows against the exact distribution: each row's probability
// and weight (beta) exact, its key on the shard its episode went to.
struct Tally {
  std::vector<Start> starts;
  std::vector<double> exact;
  std::vector<std::size_t> shard_of;
  double beta = 0;
  std::vector<double> counts = std::vector<double>(starts.size(), 0.0);

  template <typename Batch>
  void add(const Batch& sample, std::span<const float> start_obs, std::size_t obs_stride) {
    const double smallest = *std::min_element(exact.begin(), exact.end());
    for (std::size_t i = 0; i < sample.size(); ++i) {
      const Start start{static_cast<std::size_t>(start_obs[i * obs_stride]),
                        static_cast<std::size_t>(start_obs[i * obs_stride + 1])};
      const auto found = std::find(starts.begin(), starts.end(), start);
      INFO("episode " << start.first << " position " << start.second);
      REQUIRE(found != starts.end());
      const auto index = static_cast<std::size_t>(found - starts.begin());
      counts[index] += 1;
      CHECK(rc::shard_of_key(sample.keys()[i]) == shard_of[start.first]);
      CHECK(sample.probabilities()[i] == Approx(exact[index]).epsilon(1e-9));
      CHECK(sample.weights()[i] == Approx(std::pow(exact[index] / smallest, -beta)).epsilon(1e-9));
    }
  }
  void check_distribution() const {
    CHECK(chi_square(counts, exact) < kChiSquare999.at(starts.size() - 1));
  }
};

// Draws `calls` n-step samples of k, checking each row's bootstrap comes from its episode.
void draw_nstep(rc::ShardedClient& client, std::string_view table, std::uint64_t k, int calls,
                Tally& tally) {
  const rc::NStepOptions options{.nstep = k, .gamma = 0.9, .beta = tally.beta, .timeout_ms = 30000};
  client.sample_nstep(table, 256, options);  // splits by table masses; then by window states
  for (int call = 0; call < calls; ++call) {
    const rc::SampleBatch sample = client.sample_nstep(table, 256, options);
    REQUIRE(sample.size() == 256);
    REQUIRE(sample.nstep() == k);
    CHECK_FALSE(sample.state());
    const auto obs = sample.field("obs").as<float>();
    const auto next = sample.field("next_obs").as<float>();
    for (std::size_t i = 0; i < sample.size(); ++i) {
      CHECK(next[2 * i] == obs[2 * i]);  // same episode
      CHECK(next[2 * i + 1] == obs[2 * i + 1] + static_cast<float>(sample.steps()[i]));
    }
    tally.add(sample, obs, 2);
  }
}

// Draws `calls` sequence samples of `length`, checking each is consecutive steps of one
// episode with no padding.
void draw_sequences(rc::ShardedClient& client, std::string_view table, std::uint64_t length,
                    int calls, Tally& tally) {
  const rc::SequenceOptions options{.beta = tally.beta, .timeout_ms = 30000};
  client.sample_sequences(table, 256, length, options);
  for (int call = 0; call < calls; ++call) {
    const rc::SequenceBatch sample = client.sample_sequences(table, 256, length, options);
    REQUIRE(sample.size() == 256);
    REQUIRE(sample.time_steps() == length);
    CHECK_FALSE(sample.state());
    const auto mask = sample.mask();
    CHECK(std::all_of(mask.begin(), mask.end(), [](std::uint8_t m) { return m == 1; }));
    const auto obs = sample.field("obs").as<float>();
    for (std::size_t i = 0; i < sample.size(); ++i) {
      for (std::size_t t = 0; t < length; ++t) {
        CHECK(obs[(i * length + t) * 2] == obs[i * length * 2]);
        CHECK(obs[(i * length + t) * 2 + 1] == obs[i * length * 2 + 1] + static_cast<float>(t));
      }
    }
    tally.add(sample, obs, 2 * length);
  }
}

// Each shard's valid starts among `starts` and their mass (uniform: their count).
std::vector<rc::TableState> shard_windows(const std::vector<Start>& starts,
                                          const std::vector<std::size_t>& shard_of,
                                          bool prioritized) {
  std::vector<rc::TableState> states(3, {0, 0.0, 1e300});
  for (const auto& start : starts) {
    rc::TableState& state = states[shard_of[start.first]];
    const double mass = prioritized ? priority_of(start) : 1.0;
    state.size += 1;
    state.mass += mass;
    state.min_mass = std::min(state.min_mass, mass);
  }
  return states;
}

rc::NStepOptions nstep_of(std::uint64_t k) {
  rc::NStepOptions options;
  options.nstep = k;
  return options;
}

void check_state(const std::optional<rc::TableState>& reported, const rc::TableState& expected) {
  REQUIRE(reported);
  CHECK(reported->size == expected.size);
  CHECK(reported->mass == Approx(expected.mass));
  CHECK(reported->min_mass == Approx(expected.min_mass));
}

}  // namespace

TEST_CASE("each sharded episode stays on the shard chosen round-robin when it opened",
          "[sharded][episodes]") {
  Shards shards;
  shards.client.create_table(episodic("ep", false));
  std::vector<std::size_t> shard_of;
  {
    rc::ShardedEpisodeWriter writer(shards.client, "ep", writer_options());
    shard_of = write(writer);
    CHECK_FALSE(writer.shard_of(0));
  }
  CHECK(shard_of == std::vector<std::size_t>{0, 1, 2, 0, 1, 2});
  CHECK(table_size(shards.client.shard(0), "ep") == 2 + 3);
  CHECK(table_size(shards.client.shard(1), "ep") == 5 + 1);
  CHECK(table_size(shards.client.shard(2), "ep") == 9 + 4);

  // Every step read back once, keys and episode ids global, each episode whole on its shard.
  std::map<std::uint64_t, std::vector<std::size_t>> positions;  // global episode -> positions
  std::map<std::uint64_t, std::set<std::size_t>> written;       // global episode -> episodes
  const std::uint64_t read = shards.client.read_all_steps(
      "ep",
      [&](const rc::StepPage& page) {
        CHECK(page.size() <= 4);
        const auto obs = page.field("obs").as<float>();
        for (std::size_t i = 0; i < page.size(); ++i) {
          const auto episode = static_cast<std::size_t>(obs[2 * i]);
          CHECK(rc::shard_of_key(page.keys()[i]) == shard_of[episode]);
          CHECK(rc::shard_of_key(page.episodes()[i]) == shard_of[episode]);
          CHECK(page.positions()[i] == static_cast<std::uint32_t>(obs[2 * i + 1]));
          positions[page.episodes()[i]].push_back(page.positions()[i]);
          written[page.episodes()[i]].insert(episode);
        }
      },
      /*page_rows=*/4);
  CHECK(read == 24);
  REQUIRE(written.size() == kLengths.size());
  for (const auto& [id, episodes] : written) {
    REQUIRE(episodes.size() == 1);  // one written episode per stored episode
    std::vector<std::size_t> whole(kLengths[*episodes.begin()]);
    std::iota(whole.begin(), whole.end(), std::size_t{0});
    CHECK(positions[id] == whole);
  }
}

TEST_CASE("a sharded episode writer pins each env's episode and returns global keys",
          "[sharded][episodes]") {
  Shards shards;
  shards.client.create_table(episodic("envs", false));
  rc::ShardedEpisodeWriter writer(shards.client, "envs", writer_options(2));
  append(writer, 0, 0, 0);
  append(writer, 1, 1, 0);
  CHECK(writer.shard_of(0) == std::optional<std::size_t>(0));
  CHECK(writer.shard_of(1) == std::optional<std::size_t>(1));
  for (std::size_t position = 1; position < 4; ++position) {
    append(writer, 0, 0, position);
    append(writer, 1, 1, position);
  }
  writer.end_episode(1);
  append(writer, 1, 2, 0);  // env 1's next episode: the next shard
  CHECK(writer.shard_of(0) == std::optional<std::size_t>(0));
  CHECK(writer.shard_of(1) == std::optional<std::size_t>(2));
  CHECK(error_code_of([&] { append(writer, 2, 0, 0); }) == rc::ErrorCode::invalid_argument);
  CHECK(error_code_of([&] { writer.end_episode(5); }) == rc::ErrorCode::invalid_argument);
  writer.close();  // env 0's episode and env 1's second one end as truncated
  CHECK(table_size(shards.client.shard(0), "envs") == 4);
  CHECK(table_size(shards.client.shard(1), "envs") == 4);
  CHECK(table_size(shards.client.shard(2), "envs") == 1);
  const auto keys = writer.keys();
  CHECK(keys.size() == 9);
  std::set<std::size_t> key_shards;
  for (std::uint64_t key : keys)
    key_shards.insert(rc::shard_of_key(key));
  CHECK(key_shards == std::set<std::size_t>{0, 1, 2});
  CHECK_FALSE(writer.shard_of(0));

  // A plain table is refused when the first step opens a shard's writer.
  shards.client.create_table(json_object(R"({"name": "plain", "capacity": 30,
      "fields": [{"name": "obs", "dtype": "float32", "shape": [2]}]})"));
  rc::ShardedEpisodeWriter plain(shards.client, "plain", writer_options());
  CHECK(error_code_of([&] { append(plain, 0, 0, 0); }) == rc::ErrorCode::invalid_argument);
  CHECK_FALSE(plain.shard_of(0));
  CHECK(error_code_of([&] { shards.client.sample_sequences("plain", 4, 2); }) ==
        rc::ErrorCode::invalid_argument);
}

TEST_CASE("sharded n-step samples draw every valid start of the union uniformly",
          "[sharded][episodes]") {
  Shards shards;
  shards.client.create_table(episodic("ns", false));
  rc::ShardedEpisodeWriter writer(shards.client, "ns", writer_options());
  // The last episode stays open: its last two steps are no start of a 3-step window.
  const auto shard_of = write(writer, /*leave_last_open=*/true);
  const auto starts = starts_of(3, /*pad=*/true, /*last_open=*/true);
  REQUIRE(starts.size() == 22);
  // Each shard's reply reports its window index: its valid starts, not its steps.
  const auto windows = shard_windows(starts, shard_of, false);
  for (std::size_t s = 0; s < 3; ++s)
    check_state(shards.client.shard(s).sample_nstep("ns", 1, nstep_of(3)).state(), windows[s]);
  Tally tally{starts, exact_distribution(starts, false), shard_of, 0.4};
  draw_nstep(shards.client, "ns", 3, 40, tally);
  tally.check_distribution();
}

TEST_CASE("sharded sequence samples draw every valid start of the union uniformly",
          "[sharded][episodes]") {
  Shards shards;
  shards.client.create_table(episodic("seq", false));
  std::vector<std::size_t> shard_of;
  {
    rc::ShardedEpisodeWriter writer(shards.client, "seq", writer_options());
    shard_of = write(writer);
  }
  // Starts of 3 whole steps: 1, 3 and 9 on the shards, not in proportion to their steps.
  const auto starts = starts_of(3, /*pad=*/false);
  REQUIRE(starts.size() == 13);
  const auto windows = shard_windows(starts, shard_of, false);
  for (std::size_t s = 0; s < 3; ++s)
    check_state(shards.client.shard(s).sample_sequences("seq", 1, 3).state(), windows[s]);
  CHECK(windows[0].size == 1);
  CHECK(windows[1].size == 3);
  CHECK(windows[2].size == 9);
  Tally tally{starts, exact_distribution(starts, false), shard_of, 0.4};
  draw_sequences(shards.client, "seq", 3, 40, tally);
  tally.check_distribution();
}

TEST_CASE("sharded prioritized window samples draw each start by its priority",
          "[sharded][episodes]") {
  Shards shards;
  shards.client.create_table(episodic("prio", true));
  rc::ShardedEpisodeWriter writer(shards.client, "prio", writer_options());
  const auto shard_of = write(writer, /*leave_last_open=*/true);
  // Priority 1 + p + 3 j: the shards' window masses differ from their tables' masses.
  set_priorities(shards.client, "prio");

  SECTION("sequences of 3 whole steps") {
    const auto starts = starts_of(3, /*pad=*/false, /*last_open=*/true);
    REQUIRE(starts.size() == 13);
    const auto windows = shard_windows(starts, shard_of, true);
    for (std::size_t s = 0; s < 3; ++s)
      check_state(shards.client.shard(s).sample_sequences("prio", 1, 3).state(), windows[s]);
    Tally tally{starts, exact_distribution(starts, true), shard_of, 1.0};
    draw_sequences(shards.client, "prio", 3, 40, tally);
    tally.check_distribution();
  }
  SECTION("n-step windows of 3 with an open episode") {
    const auto starts = starts_of(3, /*pad=*/true, /*last_open=*/true);
    REQUIRE(starts.size() == 22);
    const auto windows = shard_windows(starts, shard_of, true);
    for (std::size_t s = 0; s < 3; ++s)
      check_state(shards.client.shard(s).sample_nstep("prio", 1, nstep_of(3)).state(), windows[s]);
    Tally tally{starts, exact_distribution(starts, true), shard_of, 0.6};
    draw_nstep(shards.client, "prio", 3, 40, tally);
    tally.check_distribution();
  }
}

}  // namespace replayd::testing
