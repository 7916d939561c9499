// Fixtures for the episodic table tests: a step schema (id, obs = id, next_obs = id + 0.5,
// rew), an episodic configuration, and helpers that append steps and draw n-step and
// sequence samples into plain vectors.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/table/episodic_table.h"

namespace replayd::testing {

inline Schema step_schema() {
  auto schema =
      Schema::create({Field{"id", DType::int64, {}}, Field{"obs", DType::float32, {}},
                      Field{"next_obs", DType::float32, {}}, Field{"rew", DType::float32, {}}});
  REQUIRE(schema.ok());
  return schema.value();
}

inline TableConfig episodic_config(std::uint32_t capacity, bool prioritized = false,
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

inline std::unique_ptr<Table> make_table(const TableConfig& config) {
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

inline Status append(Table& table, std::uint64_t writer, const std::vector<std::uint64_t>& episodes,
                     const std::vector<std::int64_t>& ids, const std::vector<float>& rewards,
                     std::vector<std::uint64_t>& keys, const std::vector<double>& priorities = {}) {
  StepRows rows(ids, rewards);
  keys.assign(ids.size(), 0);
  return table.episodic()->append_steps(writer, episodes, rows.spans, ids.size(), priorities, keys);
}

struct NStepDraws {
  Status status = Ok{};
  std::vector<std::uint64_t> keys;
  std::vector<double> probabilities, weights, discounts;
  std::vector<std::uint32_t> times, steps;
  std::vector<std::int64_t> id;
  std::vector<float> obs, next_obs, rew, returns, bootstrap;
};

inline NStepDraws sample_nstep(Table& table, std::uint64_t n, const NStepRequest& request) {
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
  d.status = table.episodic()->sample_nstep(n, request, out);
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

inline SequenceDraws sample_sequences(Table& table, std::uint64_t n,
                                      const SequenceRequest& request) {
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
  d.status = table.episodic()->sample_sequences(
      n, request, SequenceBuffers{d.keys, d.probabilities, d.weights, d.times, columns, d.mask});
  return d;
}

// Whole steps read into plain vectors (id column only kept beside the metadata).
struct StepRowsOut {
  std::vector<std::uint64_t> keys, episodes, sequences;
  std::vector<std::uint32_t> positions;
  std::vector<std::int64_t> id;
  std::vector<float> obs, next_obs, rew;
  std::vector<std::span<std::byte>> columns;

  explicit StepRowsOut(std::size_t rows)
      : keys(rows),
        episodes(rows),
        sequences(rows),
        positions(rows),
        id(rows),
        obs(rows),
        next_obs(rows),
        rew(rows) {
    columns = {std::as_writable_bytes(std::span(id)), std::as_writable_bytes(std::span(obs)),
               std::as_writable_bytes(std::span(next_obs)), std::as_writable_bytes(std::span(rew))};
  }
  StepBuffers buffers() { return StepBuffers{keys, episodes, positions, sequences, columns}; }
};

// Every stored step's id, by reading everything in pages of `page` steps.
inline std::vector<std::int64_t> read_all_ids(const Table& table, std::size_t page) {
  std::vector<std::int64_t> ids;
  std::uint64_t after = 0;
  for (;;) {
    StepRowsOut rows(page);
    auto n = table.episodic()->read_steps(after, rows.buffers());
    REQUIRE(n.ok());
    if (*n == 0) return ids;
    for (std::size_t i = 0; i < *n; ++i) {
      REQUIRE(rows.obs[i] == static_cast<float>(rows.id[i]));
      ids.push_back(rows.id[i]);
    }
    REQUIRE(rows.sequences[*n - 1] > after);
    after = rows.sequences[*n - 1];
  }
}

}  // namespace replayd::testing
