// Tests for the episodic operations of core/table (core/table/episodic_table.cpp): every n-step
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

#include "core/table/episodic_table.h"
#include "tests/core/chi_square.h"
#include "tests/core/episode_fixtures.h"

namespace replayd {
namespace {

using Catch::Matchers::Contains;
using namespace testing;

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
  std::uint32_t times = 0;  // drawn as a start
};

struct ModelEpisode {
  std::uint32_t length = 0;
  EpisodeState state = EpisodeState::open;
};

struct Model {
  std::uint32_t capacity = 0;
  std::uint32_t max_times = 0;  // max_times_sampled
  bool lifo = false;            // remover: LIFO (newest step goes) instead of FIFO
  std::vector<ModelStep> steps;
  std::map<std::uint64_t, ModelEpisode> episodes;
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::size_t> at;  // (episode, position)
  std::map<std::uint64_t, std::size_t> by_key;
  std::size_t stored = 0;

  void append(std::uint64_t episode, std::int64_t id, float rew, std::uint64_t key,
              double priority) {
    if (stored == capacity) {  // FIFO: the oldest stored step goes; LIFO: the newest
      for (std::size_t i = 0; i < steps.size(); ++i) {
        ModelStep& step = steps[lifo ? steps.size() - 1 - i : i];
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
    if (max_times != 0 && s.times >= max_times) return false;
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
  // Whether a sample of n can be served: a valid start, and with max_times enough draws left.
  bool can_sample(const std::set<std::uint64_t>& valid, std::uint64_t n) const {
    if (valid.empty()) return false;
    if (max_times == 0) return true;
    std::uint64_t left = 0;
    for (auto key : valid)
      left += max_times - steps[by_key.at(key)].times;
    return left >= n;
  }
  // Counts a draw of `key`; drops it from `valid` when it retires.
  std::uint32_t drawn(std::uint64_t key, std::set<std::uint64_t>& valid) {
    ModelStep& s = steps[by_key.at(key)];
    ++s.times;
    if (max_times != 0 && s.times >= max_times) valid.erase(key);
    return s.times;
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
void check_nstep(Table& table, Model& model, const NStepRequest& request, std::uint64_t n,
                 bool prioritized) {
  auto valid = model.valid_keys(spec_of(request));
  REQUIRE(table.episodic()->nstep_starts(request).value() == valid.size());
  auto d = sample_nstep(table, n, request);
  if (!model.can_sample(valid, n)) {
    REQUIRE(d.status.error().code == ErrorCode::would_block);
    return;
  }
  REQUIRE(d.status.ok());
  for (std::uint64_t i = 0; i < n; ++i) {
    INFO("k " << request.k << " draw " << i << " key " << d.keys[i]);
    REQUIRE(valid.count(d.keys[i]) == 1);
    double mass = 0;
    for (auto key : valid)
      mass += model.steps[model.by_key.at(key)].priority;
    const std::size_t valid_now = valid.size();
    REQUIRE(d.times[i] == model.drawn(d.keys[i], valid));
    const ModelStep& s = model.steps[model.by_key.at(d.keys[i])];
    REQUIRE(d.id[i] == s.id);
    REQUIRE(d.rew[i] == s.rew);
    if (prioritized) {
      REQUIRE(d.probabilities[i] == Approx(s.priority / mass).epsilon(1e-9));
    } else {
      REQUIRE(d.probabilities[i] == 1.0 / static_cast<double>(valid_now));
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

void check_sequences(Table& table, Model& model, const SequenceRequest& request, std::uint64_t n) {
  auto valid = model.valid_keys(spec_of(request));
  REQUIRE(table.episodic()->sequence_starts(request).value() == valid.size());
  auto d = sample_sequences(table, n, request);
  if (!model.can_sample(valid, n)) {
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
    REQUIRE(d.times[i] == model.drawn(d.keys[i], valid));
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

// Reading everything gives the stored steps in insertion order; drawn whole episodes are
// exactly the complete ones (ended, every step stored), read back in position order.
void check_reads(Table& table, const Model& model) {
  std::vector<std::int64_t> stored;
  for (const auto& s : model.steps)
    if (s.stored) stored.push_back(s.id);
  REQUIRE(read_all_ids(table, 4) == stored);
  std::set<std::uint64_t> complete;
  for (const auto& [id, e] : model.episodes) {
    bool all = e.state != EpisodeState::open;
    for (std::uint32_t p = 0; all && p < e.length; ++p)
      all = model.step(id, p) != nullptr;
    if (all) complete.insert(id);
  }
  std::vector<std::uint64_t> ids(3);
  std::vector<double> probabilities(3);
  const Status drawn = table.episodic()->sample_episodes(3, ids, probabilities);
  if (complete.empty()) {
    REQUIRE(drawn.error().code == ErrorCode::would_block);
    return;
  }
  REQUIRE(drawn.ok());
  for (std::size_t i = 0; i < 3; ++i) {
    REQUIRE(complete.count(ids[i]) == 1);
    REQUIRE(probabilities[i] == 1.0 / static_cast<double>(complete.size()));
  }
  const std::uint64_t rows = table.episodic()->episode_steps(ids).value();
  StepRowsOut out(rows);
  std::vector<std::uint64_t> offsets(4);
  REQUIRE(table.episodic()->read_episodes(ids, out.buffers(), offsets).ok());
  out.fill_cold(table);
  for (std::size_t i = 0; i < 3; ++i) {
    const ModelEpisode& e = model.episodes.at(ids[i]);
    REQUIRE(offsets[i + 1] - offsets[i] == e.length);
    for (std::uint32_t p = 0; p < e.length; ++p) {
      REQUIRE(out.id[offsets[i] + p] == model.step(ids[i], p)->id);
      REQUIRE(out.positions[offsets[i] + p] == p);
      REQUIRE(out.episodes[offsets[i] + p] == ids[i]);
    }
  }
}

// A random stream: two writers with three environments each, steps appended in batches
// across environments, random terminations and truncations, deletions, a writer that
// leaves mid-episode; after every operation, draws of every request kind are checked.
// ram_rows > 0: the table has a file tier keeping that many steps in RAM, every step past
// them written out (to a FakeTierDisk) after each operation, so that windows and sequences
// span both tiers.
void run_random_stream(bool prioritized, std::uint64_t seed, std::uint32_t max_times = 0,
                       SelectorKind remover = SelectorKind::fifo, std::uint64_t ram_rows = 0) {
  constexpr std::uint32_t kCapacity = 23;
  TableConfig config = episodic_config(kCapacity, prioritized, seed);
  config.max_times_sampled = max_times;
  config.remover = remover;
  config.file_tier.ram_bytes = ram_rows * fixed_row_bytes(config.schema);
  auto table = make_table(config);
  struct ForgetDisk {
    const Table* table;
    ~ForgetDisk() { tier_disks().erase(table); }
  } forget{table.get()};
  FakeTierDisk* disk = ram_rows > 0 ? &tier_disks()[table.get()] : nullptr;
  Model model;
  model.capacity = kCapacity;
  model.max_times = max_times;
  model.lifo = remover == SelectorKind::lifo;
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
        if (current[writer][env] == 0)
          current[writer][env] = table->episodic()->open_episode(writer).value();
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
      REQUIRE(table->episodic()
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
      table->episodic()->end_writer(writer);
      REQUIRE(table->episodic()->episodes().open_episodes(writer).empty());
    }
    REQUIRE(table->size() == model.stored);
    if (disk != nullptr) {
      disk->spill(*table);
      REQUIRE(table->tier()->hot_rows() <= ram_rows);
      REQUIRE(table->tier()->hot_rows() + table->tier()->cold_rows() == model.stored);
    }
    for (const auto& request : nsteps)
      check_nstep(*table, model, request, 3, prioritized);
    if (!prioritized) {
      for (const auto& request : sequences)
        check_sequences(*table, model, request, 2);
    }
    if (op % 5 == 0) check_reads(*table, model);
  }
}

TEST_CASE(
    "n-step, sequence, whole-episode draws and reading everything match a brute-force model") {
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

TEST_CASE("with max_times_sampled, starts retire from every window exactly as in the model") {
  for (std::uint64_t seed : {21, 22}) {
    INFO("seed " << seed);
    run_random_stream(false, seed, 3);
    run_random_stream(true, seed, 2);
  }
}

TEST_CASE("over a file tier (5 of 23 steps in RAM) every draw and read matches the model") {
  for (std::uint64_t seed : {41, 42}) {
    INFO("seed " << seed);
    run_random_stream(false, seed, 0, SelectorKind::fifo, 5);
    run_random_stream(true, seed, 0, SelectorKind::fifo, 5);
    run_random_stream(false, seed, 3, SelectorKind::fifo, 5);
    run_random_stream(true, seed, 2, SelectorKind::fifo, 1);
  }
}

TEST_CASE("with LIFO eviction (the newest step of an open episode goes) draws match the model") {
  for (std::uint64_t seed : {31, 32}) {
    INFO("seed " << seed);
    run_random_stream(false, seed, 0, SelectorKind::lifo);
    run_random_stream(true, seed, 2, SelectorKind::lifo);
  }
}

// Appends one step to `episode` and returns its key.
std::uint64_t step(Table& table, std::uint64_t writer, std::uint64_t episode, std::int64_t id,
                   float rew = 1.0f, double priority = -1) {
  std::vector<std::uint64_t> keys;
  std::vector<double> priorities;
  if (priority >= 0) priorities.push_back(priority);
  const Status status = append(table, writer, {episode}, {id}, {rew}, keys, priorities);
  INFO((status.ok() ? std::string() : status.error().message));
  REQUIRE(status.ok());
  return keys[0];
}

TEST_CASE("an n-step transition sums discounted rewards and bootstraps h steps later") {
  auto table = make_table(episodic_config(16));
  const auto episode = table->episodic()->open_episode(1).value();
  for (std::int64_t id = 1; id <= 4; ++id)
    step(*table, 1, episode, id, static_cast<float>(id));  // rewards 1, 2, 3, 4
  // Open episode, k = 3: only starts with 3 steps stored are valid (ids 1 and 2).
  CHECK(table->episodic()->nstep_starts({3, 0.5, 0}).value() == 2);
  REQUIRE(table->episodic()->end_episode(1, episode, EpisodeEnd::terminated).ok());
  // Ended: every step is a start; windows shrink at the end.
  CHECK(table->episodic()->nstep_starts({3, 0.5, 0}).value() == 4);
  for (int draw = 0; draw < 50; ++draw) {
    auto d = sample_nstep(*table, 1, {3, 0.5, 0});
    REQUIRE(d.status.ok());
    switch (d.id[0]) {
      case 1:  // 1 + 0.5 * 2 + 0.25 * 3, bootstrap from step 3, not terminal
        CHECK(d.returns[0] == 2.75f);
        CHECK(d.bootstrap[0] == 3.5f);
        CHECK(d.discounts[0] == 0.125);
        CHECK(d.steps[0] == 3);
        break;
      case 3:  // 3 + 0.5 * 4, the episode terminates at step 4: no bootstrap
        CHECK(d.returns[0] == 5.0f);
        CHECK(d.bootstrap[0] == 4.5f);
        CHECK(d.discounts[0] == 0.0);
        CHECK(d.steps[0] == 2);
        break;
      default:
        break;
    }
  }
}

TEST_CASE("a truncated episode bootstraps from its final observation with gamma^h") {
  auto table = make_table(episodic_config(16));
  const auto episode = table->episodic()->open_episode(1).value();
  for (std::int64_t id = 1; id <= 2; ++id)
    step(*table, 1, episode, id, 1.0f);
  REQUIRE(table->episodic()->end_episode(1, episode, EpisodeEnd::truncated).ok());
  std::set<std::int64_t> seen;
  for (int draw = 0; draw < 40; ++draw) {
    auto d = sample_nstep(*table, 1, {5, 0.5, 0});
    REQUIRE(d.status.ok());
    seen.insert(d.id[0]);
    const std::uint32_t h = d.id[0] == 1 ? 2 : 1;
    CHECK(d.steps[0] == h);
    CHECK(d.bootstrap[0] == 2.5f);  // next_obs of the last step
    CHECK(d.discounts[0] == std::pow(0.5, h));
  }
  CHECK(seen == std::set<std::int64_t>{1, 2});
}

TEST_CASE("an episode whose first steps were evicted stays usable for windows wholly stored") {
  auto table = make_table(episodic_config(4));
  const auto episode = table->episodic()->open_episode(1).value();
  for (std::int64_t id = 1; id <= 6; ++id)
    step(*table, 1, episode, id);  // steps 1 and 2 evicted
  CHECK(table->size() == 4);
  CHECK(table->episodic()->episodes().find(episode)->first == 2);
  CHECK(table->episodic()->nstep_starts({2, 1.0, 0}).value() == 3);  // ids 3, 4, 5
  CHECK(table->episodic()->sequence_starts({4, 1, 0, false, 0}).value() == 1);
  // A burn-in that reaches back to evicted steps makes the start unusable.
  CHECK(table->episodic()->sequence_starts({2, 1, 1, false, 0}).value() == 2);  // ids 4, 5
}

TEST_CASE("a padded sequence masks the steps past its episode's end, an unpadded one is full") {
  auto table = make_table(episodic_config(16));
  const auto episode = table->episodic()->open_episode(1).value();
  for (std::int64_t id = 1; id <= 3; ++id)
    step(*table, 1, episode, id);
  REQUIRE(table->episodic()->end_episode(1, episode, EpisodeEnd::terminated).ok());
  CHECK(table->episodic()->sequence_starts({4, 1, 0, false, 0}).value() == 0);
  CHECK(sample_sequences(*table, 1, {4, 1, 0, false, 0}).status.error().code ==
        ErrorCode::would_block);
  CHECK(table->episodic()->sequence_starts({4, 1, 0, true, 0}).value() == 3);
  CHECK(table->episodic()->sequence_starts({4, 2, 0, true, 0}).value() == 2);  // positions 0 and 2
  for (int draw = 0; draw < 20; ++draw) {
    auto d = sample_sequences(*table, 1, {4, 1, 0, true, 0});
    REQUIRE(d.status.ok());
    const std::int64_t first = d.id[0];
    for (std::int64_t j = 0; j < 4; ++j) {
      const bool real = first + j <= 3;
      CHECK(d.mask[j] == (real ? 1 : 0));
      CHECK(d.id[j] == (real ? first + j : 0));
    }
  }
}

TEST_CASE("a writer that leaves mid-episode has it ended as truncated, its steps kept") {
  auto table = make_table(episodic_config(16));
  const auto with_steps = table->episodic()->open_episode(7).value();
  const auto empty = table->episodic()->open_episode(7).value();
  const auto other = table->episodic()->open_episode(8).value();
  step(*table, 7, with_steps, 1);
  step(*table, 7, with_steps, 2);
  step(*table, 8, other, 3);
  CHECK(table->episodic()->end_writer(7) == 1);
  CHECK(table->episodic()->episodes().find(with_steps)->state == EpisodeState::truncated);
  CHECK(table->episodic()->episodes().find(empty) == nullptr);
  CHECK(table->episodic()->episodes().find(other)->state == EpisodeState::open);
  CHECK(table->size() == 3);
  CHECK(table->episodic()->nstep_starts({3, 1.0, 0}).value() ==
        2);  // short windows of the ended episode
}

TEST_CASE("malformed episodic requests are refused by name and change nothing") {
  auto table = make_table(episodic_config(8));
  const auto episode = table->episodic()->open_episode(1).value();
  const auto empty = table->episodic()->open_episode(1).value();
  step(*table, 1, episode, 1);
  step(*table, 1, episode, 2);
  const TableInfo before = table->info();
  const auto code_of = [](const Status& status) {
    REQUIRE_FALSE(status.ok());
    return status.error().code;
  };
  CHECK(code_of(sample_nstep(*table, 1, {0, 0.9, 0}).status) == ErrorCode::invalid_argument);
  CHECK(code_of(sample_nstep(*table, 1, {9, 0.9, 0}).status) == ErrorCode::invalid_argument);
  CHECK(code_of(sample_nstep(*table, 1, {1, -0.1, 0}).status) == ErrorCode::invalid_argument);
  CHECK(code_of(sample_nstep(*table, 1, {1, 1.5, 0}).status) == ErrorCode::invalid_argument);
  CHECK(code_of(sample_nstep(*table, 1, {1, std::nan(""), 0}).status) ==
        ErrorCode::invalid_argument);
  CHECK(code_of(sample_nstep(*table, 1, {1, 0.9, -1}).status) == ErrorCode::invalid_argument);
  CHECK(code_of(sample_sequences(*table, 1, {0, 1, 0, false, 0}).status) ==
        ErrorCode::invalid_argument);
  CHECK(code_of(sample_sequences(*table, 1, {9, 1, 0, false, 0}).status) ==
        ErrorCode::invalid_argument);
  CHECK(code_of(sample_sequences(*table, 1, {6, 1, 3, false, 0}).status) ==
        ErrorCode::invalid_argument);
  CHECK(code_of(sample_sequences(*table, 1, {2, 0, 0, false, 0}).status) ==
        ErrorCode::invalid_argument);
  auto ended_empty = table->episodic()->end_episode(1, empty, EpisodeEnd::terminated);
  CHECK(code_of(ended_empty) == ErrorCode::invalid_argument);
  CHECK_THAT(ended_empty.error().message, Contains("has no steps"));
  CHECK_THAT(table->episodic()->end_episode(2, episode, EpisodeEnd::terminated).error().message,
             Contains("not open for this writer"));
  CHECK(code_of(table->episodic()->end_episode(1, 999, EpisodeEnd::truncated)) ==
        ErrorCode::invalid_argument);
  std::vector<std::uint64_t> keys;
  CHECK(code_of(append(*table, 2, {episode}, {3}, {1.0f}, keys)) == ErrorCode::invalid_argument);
  // A batch with one bad episode id stores none of its steps.
  CHECK(code_of(append(*table, 1, {episode, 999}, {3, 4}, {1.0f, 1.0f}, keys)) ==
        ErrorCode::invalid_argument);
  CHECK(code_of(append(*table, 1, {episode}, {3, 4}, {1.0f, 1.0f}, keys)) ==
        ErrorCode::invalid_argument);
  StepRows rows({3}, {1.0f});
  keys.assign(1, 0);
  CHECK(code_of(table->insert(rows.spans, 1, {}, keys)) == ErrorCode::failed_precondition);
  CHECK(table->info().counters == before.counters);
  CHECK(table->size() == 2);
  CHECK(table->episodic()->episodes().find(episode)->length == 2);
  CHECK(table->episodic()->episodes().find(episode)->state == EpisodeState::open);
  REQUIRE(table->episodic()->end_episode(1, episode, EpisodeEnd::terminated).ok());
  CHECK(code_of(table->episodic()->end_episode(1, episode, EpisodeEnd::terminated)) ==
        ErrorCode::invalid_argument);
  CHECK(code_of(append(*table, 1, {episode}, {3}, {1.0f}, keys)) == ErrorCode::invalid_argument);
}

TEST_CASE("a table that is not episodic has no episodic part to ask for episode operations") {
  TableConfig config = episodic_config(8);
  config.episodes.enabled = false;
  auto table = make_table(config);
  CHECK(table->episodic() == nullptr);
  config.episodes.enabled = true;
  CHECK(make_table(config)->episodic() != nullptr);
}

TEST_CASE("an episodic table needs a uniform or prioritized sampler and a float reward field") {
  TableConfig config = episodic_config(8);
  config.sampler.kind = SelectorKind::fifo;
  CHECK_THAT(Table::create(config).error().message, Contains("uniform or prioritized"));
  config = episodic_config(8);
  config.episodes.reward_field = "id";
  CHECK_THAT(Table::create(config).error().message, Contains("scalar float32 or float64"));
  config.episodes.reward_field = "reward";
  CHECK_THAT(Table::create(config).error().message, Contains("no field named 'reward'"));
  config = episodic_config(8);
  config.episodes.bootstrap_fields = {"next_state"};
  CHECK_THAT(Table::create(config).error().message, Contains("no field named 'next_state'"));
  // max_table_bytes counts the episode bookkeeping and the most window indexes.
  config = episodic_config(8);
  const TableBytes bytes = table_bytes(config);
  CHECK(bytes.episodes >= 8 * kEpisodeBytesPerSlot + kMaxWindowIndexes * 8);
  const auto total = static_cast<std::uint64_t>(bytes.total());
  CHECK_THAT(Table::create(config, total - 1).error().message, Contains("episodes "));
  CHECK(Table::create(config, total).ok());
  config.episodes.enabled = false;
  CHECK(table_bytes(config).episodes == 0);
}

TEST_CASE("more distinct window requirements than the limit are served, the unused ones dropped") {
  auto table = make_table(episodic_config(16));
  const auto episode = table->episodic()->open_episode(1).value();
  for (std::int64_t id = 1; id <= 6; ++id)
    step(*table, 1, episode, id);
  REQUIRE(table->episodic()->end_episode(1, episode, EpisodeEnd::terminated).ok());
  for (std::uint32_t k = 1; k <= WindowIndexSet::kMaxIndexes; ++k)
    CHECK(table->episodic()->nstep_starts({k, 0.9, 0}).ok());
  CHECK(table->episodic()->nstep_starts({1, 0.5, 0}).ok());  // gamma is not part of the requirement
  // A ninth requirement is built in the place of the least recently used, with the right
  // answer; the dropped one is built again, exactly, when asked for.
  CHECK(table->episodic()->sequence_starts({3, 1, 0, false, 0}).value() == 4);
  CHECK(table->episodic()->nstep_starts({2, 0.9, 0}).value() == 6);
  CHECK(sample_nstep(*table, 4, {2, 0.9, 0}).status.ok());
  // A reset drops them all: a requirement used before it is built anew, empty.
  table->reset();
  CHECK(table->episodic()->nstep_starts({2, 0.9, 0}).value() == 0);
}

TEST_CASE("a start sampled max_times_sampled times retires, its step stays for other windows") {
  TableConfig config = episodic_config(16);
  config.max_times_sampled = 2;
  auto table = make_table(config);
  const auto episode = table->episodic()->open_episode(1).value();
  for (std::int64_t id = 1; id <= 3; ++id)
    step(*table, 1, episode, id);
  REQUIRE(table->episodic()->end_episode(1, episode, EpisodeEnd::terminated).ok());
  // 3 starts x 2 draws each: a sample of 7 can never be served, one of 6 can.
  CHECK(sample_nstep(*table, 7, {1, 0.9, 0}).status.error().code == ErrorCode::would_block);
  auto d = sample_nstep(*table, 6, {1, 0.9, 0});
  REQUIRE(d.status.ok());
  std::map<std::int64_t, int> draws;
  for (auto id : d.id)
    ++draws[id];
  CHECK(draws == std::map<std::int64_t, int>{{1, 2}, {2, 2}, {3, 2}});
  CHECK(table->episodic()->nstep_starts({1, 0.9, 0}).value() == 0);
  CHECK(table->size() == 3);  // the steps stay as data
  CHECK(table->info().counters.expirations == 3);
  // A retired start is retired for every window, also one built afterwards.
  CHECK(table->episodic()->nstep_starts({2, 0.9, 0}).value() == 0);
}

TEST_CASE("n-step starts are drawn uniformly over exactly the valid starts") {
  auto table = make_table(episodic_config(40, false, 99));
  // Two interleaved episodes, one ended, one open; 40 steps then 10 evicted.
  const auto a = table->episodic()->open_episode(1).value();
  const auto b = table->episodic()->open_episode(1).value();
  for (std::int64_t id = 1; id <= 50; ++id)
    step(*table, 1, id % 2 ? a : b, id);
  REQUIRE(table->episodic()->end_episode(1, a, EpisodeEnd::truncated).ok());
  // b (even ids 12..50, open): starts with 3 stored steps: ids 12..46; a: every stored step.
  std::map<std::int64_t, std::size_t> index;
  for (std::int64_t id = 11; id <= 50; ++id) {
    if (id % 2 == 1 || id <= 46) index.emplace(id, index.size());
  }
  REQUIRE(table->episodic()->nstep_starts({3, 0.9, 0}).value() == index.size());
  std::vector<std::uint64_t> counts(index.size(), 0);
  for (int draw = 0; draw < 2000; ++draw) {
    auto d = sample_nstep(*table, 100, {3, 0.9, 0});
    REQUIRE(d.status.ok());
    for (auto id : d.id) {
      REQUIRE(index.count(id) == 1);
      ++counts[index.at(id)];
    }
  }
  const auto test =
      testing::chi_square(counts, std::vector<double>(index.size(), 1.0 / index.size()));
  INFO("chi2 = " << test.statistic << ", df = " << test.df << ", critical = " << test.critical);
  CHECK(test.passes());
}

TEST_CASE("prioritized sequences are drawn in proportion to their start's priority^alpha") {
  TableConfig config = episodic_config(32, true, 5);
  config.sampler.priority_exponent = 0.5;
  auto table = make_table(config);
  const auto episode = table->episodic()->open_episode(1).value();
  std::vector<double> priorities;
  for (std::int64_t id = 1; id <= 20; ++id) {
    priorities.push_back(static_cast<double>(id % 5));  // 0 never drawn
    step(*table, 1, episode, id, 1.0f, priorities.back());
  }
  // Sequences of 4, stride 2: starts at positions 0, 2, ..., 16 (ids 1, 3, ..., 17).
  std::vector<double> expected(20, 0.0);
  double total = 0;
  for (std::int64_t id = 1; id <= 17; id += 2)
    total += std::sqrt(priorities[id - 1]);
  for (std::int64_t id = 1; id <= 17; id += 2)
    expected[id - 1] = std::sqrt(priorities[id - 1]) / total;
  std::vector<std::uint64_t> counts(20, 0);
  for (int draw = 0; draw < 2000; ++draw) {
    auto d = sample_sequences(*table, 100, {4, 2, 0, false, 0.4});
    REQUIRE(d.status.ok());
    for (std::size_t i = 0; i < 100; ++i) {
      const std::int64_t id = d.id[i * 4];
      REQUIRE(expected[id - 1] > 0);
      REQUIRE(d.probabilities[i] == Approx(expected[id - 1]).epsilon(1e-9));
      ++counts[id - 1];
    }
  }
  const auto test = testing::chi_square(counts, expected);
  INFO("chi2 = " << test.statistic << ", df = " << test.df << ", critical = " << test.critical);
  CHECK(test.passes());
}

TEST_CASE("reading everything pages on past steps stored and removed between pages") {
  auto table = make_table(episodic_config(6));
  const auto episode = table->episodic()->open_episode(1).value();
  std::vector<std::uint64_t> keys;
  for (std::int64_t id = 1; id <= 4; ++id)
    keys.push_back(step(*table, 1, episode, id));
  StepRowsOut page(2);
  REQUIRE(table->episodic()->read_steps(0, page.buffers()).value() == 2);
  CHECK(page.id == std::vector<std::int64_t>{1, 2});
  const std::uint64_t after = page.sequences[1];
  REQUIRE(table->delete_keys(std::span(&keys[2], 1)).deleted == 1);  // id 3
  for (std::int64_t id = 5; id <= 8; ++id)
    step(*table, 1, episode, id);  // evicts id 1, already read
  StepRowsOut rest(10);
  const auto n = table->episodic()->read_steps(after, rest.buffers()).value();
  CHECK(std::vector<std::int64_t>(rest.id.begin(), rest.id.begin() + n) ==
        std::vector<std::int64_t>{4, 5, 6, 7, 8});
  CHECK(table->episodic()->episode_steps(std::vector<std::uint64_t>{episode}).value() == 6);
  CHECK(table->episodic()->episode_steps(std::vector<std::uint64_t>{999}).error().code ==
        ErrorCode::not_found);
}

TEST_CASE("n-step and sequence samples are admitted by the rate limiter as plain samples are") {
  TableConfig config = episodic_config(64);
  config.rate_limiter = RateLimiterConfig::sample_to_insert_ratio(1.0, 3, 2.0);
  auto episodic = make_table(config);
  config.episodes.enabled = false;
  auto plain = make_table(config);
  const auto episode = episodic->episodic()->open_episode(1).value();
  std::vector<std::uint64_t> keys(1);
  StepRows row({0}, {1.0f});
  std::uint64_t admitted = 0;
  for (std::int64_t id = 1; id <= 12; ++id) {
    step(*episodic, 1, episode, id);
    REQUIRE(plain->insert(row.spans, 1, {}, keys).ok());
    // Samples of each kind alternate; both tables admit exactly the same ones.
    for (int round = 0; round < 4; ++round) {
      const bool may = plain->may_sample(1);
      CHECK(episodic->episodic()->may_sample_nstep(1, {1, 0.9, 0}) == may);
      const Status status = id % 2 ? sample_nstep(*episodic, 1, {1, 0.9, 0}).status
                                   : sample_sequences(*episodic, 1, {1, 1, 0, false, 0}).status;
      CHECK(status.ok() == may);
      if (!may) {
        CHECK(status.error().code == ErrorCode::would_block);
        break;
      }
      std::vector<std::uint64_t> k(1);
      std::vector<double> p(1), w(1);
      std::vector<std::uint32_t> t(1);
      std::vector<std::int64_t> ids(1);
      std::vector<float> obs(1), next(1), rew(1);
      std::vector<std::span<std::byte>> columns{
          std::as_writable_bytes(std::span(ids)), std::as_writable_bytes(std::span(obs)),
          std::as_writable_bytes(std::span(next)), std::as_writable_bytes(std::span(rew))};
      REQUIRE(plain->sample(1, 0.0, SampleBuffers{k, p, w, t, columns}).ok());
      ++admitted;
    }
  }
  CHECK(admitted > 3);
  CHECK(episodic->info().rate_limiter == plain->info().rate_limiter);
}

}  // namespace
}  // namespace replayd
