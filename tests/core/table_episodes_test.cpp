// Tests for the episodic operations of core/table (core/table_episodes.cpp): every n-step
// and sequence draw is checked exactly against a brute-force reference model on random
// streams (several writers and environments interleaved, terminations, truncations,
// deletions, eviction past capacity); draws are chi-square tested over exactly the valid
// starts; malformed requests are refused with the table unchanged.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/table.h"
#include "tests/core/chi_square.h"

namespace replayd {
namespace {

using Catch::Matchers::Contains;

Schema step_schema() {
  auto schema =
      Schema::create({Field{"id", DType::int64, {}}, Field{"obs", DType::float32, {}},
                      Field{"next_obs", DType::float32, {}}, Field{"rew", DType::float32, {}}});
  REQUIRE(schema.ok());
  return schema.value();
}

TableConfig episodic_config(std::uint32_t capacity, bool prioritized = false,
                            std::uint64_t seed = 7) {
  TableConfig config;
  config.name = "episodes";
  config.schema = step_schema();
  config.capacity = capacity;
  config.sampler =
      SelectorConfig{prioritized ? SelectorKind::prioritized : SelectorKind::uniform, 1.0};
  config.remover = SelectorKind::fifo;
  config.rate_limiter = RateLimiterConfig::min_size(1);
  config.seed = seed;
  config.episodes.enabled = true;
  return config;
}

std::unique_ptr<Table> make_table(const TableConfig& config) {
  auto table = Table::create(config);
  INFO((table.ok() ? std::string() : table.error().message));
  REQUIRE(table.ok());
  return std::move(table).value();
}

// Rows of steps: id, obs = id, next_obs = id + 0.5, rew as given.
struct StepRows {
  std::vector<std::int64_t> id;
  std::vector<float> obs, next_obs, rew;
  std::vector<std::span<const std::byte>> spans;

  StepRows(const std::vector<std::int64_t>& ids, const std::vector<float>& rewards)
      : id(ids), rew(rewards) {
    for (auto value : ids) {
      obs.push_back(static_cast<float>(value));
      next_obs.push_back(static_cast<float>(value) + 0.5f);
    }
    spans = {std::as_bytes(std::span(id)), std::as_bytes(std::span(obs)),
             std::as_bytes(std::span(next_obs)), std::as_bytes(std::span(rew))};
  }
};

Status append(Table& table, std::uint64_t writer, const std::vector<std::uint64_t>& episodes,
              const std::vector<std::int64_t>& ids, const std::vector<float>& rewards,
              std::vector<std::uint64_t>& keys, const std::vector<double>& priorities = {}) {
  StepRows rows(ids, rewards);
  keys.assign(ids.size(), 0);
  return table.append_steps(writer, episodes, rows.spans, ids.size(), priorities, keys);
}

struct NStepDraws {
  Status status = Ok{};
  std::vector<std::uint64_t> keys;
  std::vector<double> probabilities, weights, discounts;
  std::vector<std::uint32_t> times, steps;
  std::vector<std::int64_t> id;
  std::vector<float> obs, next_obs, rew, returns, bootstrap;
};

NStepDraws sample_nstep(Table& table, std::uint64_t n, const NStepRequest& request) {
  NStepDraws d;
  d.keys.resize(n);
  d.probabilities.resize(n);
  d.weights.resize(n);
  d.discounts.resize(n);
  d.times.resize(n);
  d.steps.resize(n);
  d.id.resize(n);
  d.obs.resize(n);
  d.next_obs.resize(n);
  d.rew.resize(n);
  d.returns.resize(n);
  d.bootstrap.resize(n);
  std::vector<std::span<std::byte>> columns{
      std::as_writable_bytes(std::span(d.id)), std::as_writable_bytes(std::span(d.obs)),
      std::as_writable_bytes(std::span(d.next_obs)), std::as_writable_bytes(std::span(d.rew))};
  std::vector<std::span<std::byte>> bootstrap{std::as_writable_bytes(std::span(d.bootstrap))};
  NStepBuffers out{SampleBuffers{d.keys, d.probabilities, d.weights, d.times, columns},
                   std::as_writable_bytes(std::span(d.returns)), bootstrap, d.discounts, d.steps};
  d.status = table.sample_nstep(n, request, out);
  return d;
}

struct SequenceDraws {
  Status status = Ok{};
  std::vector<std::uint64_t> keys;
  std::vector<double> probabilities, weights;
  std::vector<std::uint32_t> times;
  std::vector<std::int64_t> id;
  std::vector<float> obs, next_obs, rew;
  std::vector<std::uint8_t> mask;
};

SequenceDraws sample_sequences(Table& table, std::uint64_t n, const SequenceRequest& request) {
  const std::uint64_t steps = std::uint64_t{request.burn_in} + request.length;
  SequenceDraws d;
  d.keys.resize(n);
  d.probabilities.resize(n);
  d.weights.resize(n);
  d.times.resize(n);
  d.id.resize(n * steps);
  d.obs.resize(n * steps);
  d.next_obs.resize(n * steps);
  d.rew.resize(n * steps);
  d.mask.resize(n * steps);
  std::vector<std::span<std::byte>> columns{
      std::as_writable_bytes(std::span(d.id)), std::as_writable_bytes(std::span(d.obs)),
      std::as_writable_bytes(std::span(d.next_obs)), std::as_writable_bytes(std::span(d.rew))};
  d.status = table.sample_sequences(
      n, request, SequenceBuffers{d.keys, d.probabilities, d.weights, d.times, columns, d.mask});
  return d;
}

// ---- The reference model: every step ever appended, in a vector; everything recomputed by
// brute force from it. Eviction is FIFO over stored steps, as the table's remover.
struct ModelStep {
  std::int64_t id = 0;
  std::uint64_t episode = 0;
  std::uint32_t position = 0;
  float rew = 0;
  std::uint64_t key = 0;
  double priority = 1.0;
  bool stored = true;
};

struct ModelEpisode {
  std::uint32_t length = 0;
  EpisodeState state = EpisodeState::open;
};

struct Model {
  std::uint32_t capacity = 0;
  std::vector<ModelStep> steps;
  std::map<std::uint64_t, ModelEpisode> episodes;
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::size_t> at;  // (episode, position)
  std::map<std::uint64_t, std::size_t> by_key;
  std::size_t stored = 0;

  void append(std::uint64_t episode, std::int64_t id, float rew, std::uint64_t key,
              double priority) {
    if (stored == capacity) {  // FIFO: the oldest stored step goes
      for (auto& step : steps) {
        if (step.stored) {
          step.stored = false;
          --stored;
          break;
        }
      }
    }
    ModelEpisode& e = episodes[episode];
    steps.push_back(ModelStep{id, episode, e.length, rew, key, priority, true});
    at[{episode, e.length}] = steps.size() - 1;
    by_key[key] = steps.size() - 1;
    ++e.length;
    ++stored;
  }
  void remove(std::uint64_t key) {
    auto& step = steps[by_key.at(key)];
    if (step.stored) {
      step.stored = false;
      --stored;
    }
  }
  const ModelStep* step(std::uint64_t episode, std::int64_t position) const {
    if (position < 0) return nullptr;
    auto it = at.find({episode, static_cast<std::uint32_t>(position)});
    if (it == at.end() || !steps[it->second].stored) return nullptr;
    return &steps[it->second];
  }
  bool valid(const ModelStep& s, const WindowSpec& spec) const {
    if (!s.stored || s.position % spec.stride != 0) return false;
    for (std::int64_t q = std::int64_t{s.position} - spec.backward; q < s.position; ++q) {
      if (q >= 0 && !step(s.episode, q)) return false;
    }
    const ModelEpisode& e = episodes.at(s.episode);
    std::int64_t end = std::int64_t{s.position} + spec.forward;
    if (end > e.length) {
      if (!spec.allow_short || e.state == EpisodeState::open) return false;
      end = e.length;
    }
    for (std::int64_t q = s.position; q < end; ++q) {
      if (!step(s.episode, q)) return false;
    }
    return true;
  }
  std::set<std::uint64_t> valid_keys(const WindowSpec& spec) const {
    std::set<std::uint64_t> keys;
    for (const auto& s : steps) {
      if (valid(s, spec)) keys.insert(s.key);
    }
    return keys;
  }
};

WindowSpec spec_of(const NStepRequest& r) {
  return WindowSpec{r.k, true, 1, 0};
}
WindowSpec spec_of(const SequenceRequest& r) {
  return WindowSpec{r.length, r.pad, r.stride, r.burn_in};
}

// Checks n-step draws exactly against the model.
void check_nstep(Table& table, const Model& model, const NStepRequest& request, std::uint64_t n,
                 bool prioritized) {
  const auto valid = model.valid_keys(spec_of(request));
  REQUIRE(table.nstep_starts(request).value() == valid.size());
  auto d = sample_nstep(table, n, request);
  if (valid.empty()) {
    REQUIRE(d.status.error().code == ErrorCode::would_block);
    return;
  }
  REQUIRE(d.status.ok());
  double mass = 0;
  for (auto key : valid)
    mass += model.steps[model.by_key.at(key)].priority;
  for (std::uint64_t i = 0; i < n; ++i) {
    INFO("k " << request.k << " draw " << i << " key " << d.keys[i]);
    REQUIRE(valid.count(d.keys[i]) == 1);
    const ModelStep& s = model.steps[model.by_key.at(d.keys[i])];
    REQUIRE(d.id[i] == s.id);
    REQUIRE(d.rew[i] == s.rew);
    if (prioritized) {
      REQUIRE(d.probabilities[i] == Approx(s.priority / mass).epsilon(1e-9));
    } else {
      REQUIRE(d.probabilities[i] == 1.0 / static_cast<double>(valid.size()));
    }
    const ModelEpisode& e = model.episodes.at(s.episode);
    const std::uint32_t left = e.length - s.position;
    const bool ended = e.state != EpisodeState::open;
    const std::uint32_t h = ended && left <= request.k ? left : request.k;
    double total = 0, scale = 1;
    const ModelStep* last = nullptr;
    for (std::uint32_t j = 0; j < h; ++j) {
      last = model.step(s.episode, s.position + j);
      REQUIRE(last != nullptr);
      total += scale * last->rew;
      scale *= request.gamma;
    }
    const bool terminal = e.state == EpisodeState::terminated && s.position + h == e.length;
    REQUIRE(d.steps[i] == h);
    REQUIRE(d.returns[i] == static_cast<float>(total));
    REQUIRE(d.bootstrap[i] == static_cast<float>(last->id) + 0.5f);
    REQUIRE(d.discounts[i] == (terminal ? 0.0 : std::pow(request.gamma, double(h))));
  }
}

void check_sequences(Table& table, const Model& model, const SequenceRequest& request,
                     std::uint64_t n) {
  const auto valid = model.valid_keys(spec_of(request));
  REQUIRE(table.sequence_starts(request).value() == valid.size());
  auto d = sample_sequences(table, n, request);
  if (valid.empty()) {
    REQUIRE(d.status.error().code == ErrorCode::would_block);
    return;
  }
  REQUIRE(d.status.ok());
  const std::uint32_t steps = request.burn_in + request.length;
  for (std::uint64_t i = 0; i < n; ++i) {
    INFO("T " << request.length << " draw " << i);
    REQUIRE(valid.count(d.keys[i]) == 1);
    const ModelStep& s = model.steps[model.by_key.at(d.keys[i])];
    REQUIRE(d.probabilities[i] == 1.0 / static_cast<double>(valid.size()));
    for (std::uint32_t j = 0; j < steps; ++j) {
      const std::int64_t position = std::int64_t{s.position} - request.burn_in + j;
      const ModelStep* expected = model.step(s.episode, position);
      const std::size_t row = i * steps + j;
      REQUIRE(d.mask[row] == (expected ? 1 : 0));
      REQUIRE(d.id[row] == (expected ? expected->id : 0));
      REQUIRE(d.obs[row] == (expected ? static_cast<float>(expected->id) : 0.0f));
    }
  }
}

// A random stream: two writers with three environments each, steps appended in batches
// across environments, random terminations and truncations, deletions, a writer that
// leaves mid-episode; after every operation, draws of every request kind are checked.
void run_random_stream(bool prioritized, std::uint64_t seed) {
  constexpr std::uint32_t kCapacity = 23;
  auto table = make_table(episodic_config(kCapacity, prioritized, seed));
  Model model;
  model.capacity = kCapacity;
  Rng rng(seed + 1);
  std::uint64_t current[2][3] = {};  // open episode of each writer's environment (0: none)
  std::int64_t next_id = 1;
  const float rewards[] = {-1.0f, 0.0f, 0.5f, 1.0f, 2.0f, 0.25f};
  const std::vector<NStepRequest> nsteps = {{1, 0.9, 0}, {3, 0.9, 0}, {5, 0.5, 0}};
  const std::vector<SequenceRequest> sequences = {{4, 1, 0, false, 0}, {4, 2, 2, true, 0}};

  for (int op = 0; op < 1500; ++op) {
    const std::uint64_t writer = rng.uniform_below(2);
    const double u = rng.uniform_double();
    if (u < 0.6) {  // a batch of one step for 1..3 environments
      std::vector<std::uint64_t> episodes;
      std::vector<std::int64_t> ids;
      std::vector<float> rews;
      std::vector<double> priorities;
      for (int env = 0; env < 3; ++env) {
        if (rng.uniform_below(2) == 0 && env != 2) continue;
        if (current[writer][env] == 0) current[writer][env] = table->open_episode(writer).value();
        episodes.push_back(current[writer][env]);
        ids.push_back(next_id++);
        rews.push_back(rewards[rng.uniform_below(6)]);
        priorities.push_back(0.25 + static_cast<double>(rng.uniform_below(8)));
      }
      std::vector<std::uint64_t> keys;
      REQUIRE(append(*table, writer, episodes, ids, rews, keys, priorities).ok());
      for (std::size_t i = 0; i < ids.size(); ++i)
        model.append(episodes[i], ids[i], rews[i], keys[i], priorities[i]);
    } else if (u < 0.8) {  // end an environment's episode
      const auto env = rng.uniform_below(3);
      const std::uint64_t episode = current[writer][env];
      if (episode == 0 || model.episodes[episode].length == 0) continue;
      const bool terminated = rng.uniform_below(2) == 0;
      REQUIRE(table
                  ->end_episode(writer, episode,
                                terminated ? EpisodeEnd::terminated : EpisodeEnd::truncated)
                  .ok());
      model.episodes[episode].state =
          terminated ? EpisodeState::terminated : EpisodeState::truncated;
      current[writer][env] = 0;
    } else if (u < 0.86) {  // delete a stored step (a hole inside an episode)
      std::vector<std::uint64_t> stored;
      for (const auto& s : model.steps)
        if (s.stored) stored.push_back(s.key);
      if (stored.empty()) continue;
      const auto key = stored[rng.uniform_below(stored.size())];
      REQUIRE(table->delete_keys(std::span(&key, 1)).deleted == 1);
      model.remove(key);
    } else if (u < 0.95 && prioritized) {  // new priority for a stored step
      std::vector<std::uint64_t> stored;
      for (const auto& s : model.steps)
        if (s.stored) stored.push_back(s.key);
      if (stored.empty()) continue;
      const auto key = stored[rng.uniform_below(stored.size())];
      const double priority = 0.5 + static_cast<double>(rng.uniform_below(10));
      REQUIRE(table->update_priorities(std::span(&key, 1), std::span(&priority, 1))->applied == 1);
      model.steps[model.by_key.at(key)].priority = priority;
    } else if (u > 0.98) {  // the writer leaves: open episodes with steps end truncated
      for (auto& episode : current[writer]) {
        if (episode != 0 && model.episodes[episode].length > 0)
          model.episodes[episode].state = EpisodeState::truncated;
        episode = 0;
      }
      table->end_writer(writer);
      REQUIRE(table->episodes()->open_episodes(writer).empty());
    }
    REQUIRE(table->size() == model.stored);
    for (const auto& request : nsteps)
      check_nstep(*table, model, request, 3, prioritized);
    if (!prioritized) {
      for (const auto& request : sequences)
        check_sequences(*table, model, request, 2);
    }
  }
}

TEST_CASE("n-step and sequence draws match a brute-force model on random episode streams") {
  for (std::uint64_t seed : {1, 2, 3}) {
    INFO("seed " << seed);
    run_random_stream(false, seed);
  }
}

TEST_CASE("prioritized n-step draws match the model's probabilities through priority updates") {
  for (std::uint64_t seed : {11, 12}) {
    INFO("seed " << seed);
    run_random_stream(true, seed);
  }
}

}  // namespace
}  // namespace replayd
