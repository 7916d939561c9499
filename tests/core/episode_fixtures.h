// Fixtures for the episodic table tests: a step schema (id, obs = id, next_obs = id + 0.5,
// rew), an episodic configuration, and helpers that append steps and draw n-step and
// sequence samples into plain vectors.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/table/episodic_table.h"

namespace replayd::testing {

// A file tier's disk for core tests, standing in for the service's segments: the record of
// each row written out (its written-out fields concatenated in schema order), by offset.
struct FakeTierDisk {
  std::map<std::uint64_t, std::vector<std::byte>> records;
  std::uint64_t next_offset = 0;

  // Writes out every row past the RAM budget, as the service's writer does.
  void spill(Table& table) {
    const auto written = table.tier_field_bytes();
    for (;;) {
      const std::vector<SpillRow> rows = table.choose_spill(8);
      if (rows.empty()) return;
      std::vector<ColdLocation> where;
      for (const SpillRow& row : rows) {
        std::vector<std::byte> record;
        for (std::size_t f = 0; f < written.size(); ++f) {
          const std::byte* cell = table.storage().cell(f, row.slot);
          record.insert(record.end(), cell, cell + written[f]);
        }
        records[next_offset] = std::move(record);
        where.push_back(ColdLocation{.segment = 0, .bytes = 100, .offset = next_offset++});
      }
      table.finish_spill(rows, where);
    }
  }

  // Reads the records of `cold` into their rows, as the service's FileTier::read_cold does:
  // into `columns` (one span per field, empty ones skipped), or for ColdTarget::bootstrap
  // into `bootstrap` (one span per bootstrap field).
  void fill(const Table& table, const std::vector<ColdDraw>& cold,
            std::span<const std::span<std::byte>> columns,
            std::span<const std::span<std::byte>> bootstrap = {}) const {
    const auto written = table.tier_field_bytes();
    const auto& names = table.config().episodes.bootstrap_fields;
    for (const ColdDraw& draw : cold) {
      const std::vector<std::byte>& record = records.at(draw.where.offset);
      std::uint64_t at = 0;
      for (std::size_t f = 0; f < written.size(); ++f) {
        if (written[f] == 0) continue;
        std::span<std::byte> to;
        if (draw.target == ColdTarget::columns) {
          to = columns[f];
        } else {
          for (std::size_t b = 0; b < names.size(); ++b)
            if (table.schema().find(names[b]) == static_cast<int>(f)) to = bootstrap[b];
        }
        if (!to.empty())
          std::memcpy(to.data() + draw.row * written[f], record.data() + at, written[f]);
        at += written[f];
      }
    }
  }
};

// The disk of each table with a file tier in a test (tables without one have none).
inline std::map<const Table*, FakeTierDisk>& tier_disks() {
  static std::map<const Table*, FakeTierDisk> disks;
  return disks;
}

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
  std::vector<ColdDraw> cold;
  if (table.tier() != nullptr) out.base.cold = &cold;
  d.status = table.episodic()->sample_nstep(n, request, out);
  if (!cold.empty()) tier_disks().at(&table).fill(table, cold, columns, bootstrap);
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
  std::vector<ColdDraw> cold;
  SequenceBuffers out{d.keys, d.probabilities, d.weights, d.times, columns, d.mask};
  if (table.tier() != nullptr) out.cold = &cold;
  d.status = table.episodic()->sample_sequences(n, request, out);
  if (!cold.empty()) tier_disks().at(&table).fill(table, cold, columns);
  return d;
}

// Whole steps read into plain vectors (id column only kept beside the metadata).
struct StepRowsOut {
  std::vector<std::uint64_t> keys, episodes, sequences;
  std::vector<std::uint32_t> positions;
  std::vector<std::int64_t> id;
  std::vector<float> obs, next_obs, rew;
  std::vector<std::span<std::byte>> columns;
  std::vector<ColdDraw> cold;  // a table with a file tier: its cold rows (fill_cold)

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
  StepBuffers buffers() {
    StepBuffers out{keys, episodes, positions, sequences, columns};
    out.cold = &cold;
    return out;
  }
  // Reads the cold rows listed by the last read from the table's disk.
  void fill_cold(const Table& table) {
    if (!cold.empty()) tier_disks().at(&table).fill(table, cold, columns);
    cold.clear();
  }
};

// Every stored step's id, by reading everything in pages of `page` steps.
inline std::vector<std::int64_t> read_all_ids(const Table& table, std::size_t page) {
  std::vector<std::int64_t> ids;
  std::uint64_t after = 0;
  for (;;) {
    StepRowsOut rows(page);
    auto n = table.episodic()->read_steps(after, rows.buffers());
    REQUIRE(n.ok());
    rows.fill_cold(table);
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
