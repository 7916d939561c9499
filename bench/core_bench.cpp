// Benchmarks of the core engine on full tables: insert, sample, priority update, and on an
// episodic table n-step and sequence samples and appends; single thread, no sockets. Results and
// the command that produced them: docs/BENCHMARKS.md.
//
// Workloads (bytes per item):
//   W1 (45):     obs float32[4], act int64, rew float32, next_obs float32[4], done uint8
//   W2 (56,457): obs uint8[4,84,84], act int32, rew float32, next_obs uint8[4,84,84], done uint8
// Tables: W1 1,000,000 items, W2 10,000 items, filled before any timing, FIFO remover,
// rate limiter min_size(1), which never blocks. Inserts run on the full table, so each new
// item evicts one. A memcpy baseline copies the same rows a W2 sample of 32 copies.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/snapshot/crc32c.h"
#include "core/storage/stream_cell.h"
#include "core/table/episodic_table.h"

namespace replayd {
namespace {

enum class Workload { w1, w2 };

Schema make_schema(Workload workload) {
  std::vector<Field> fields;
  if (workload == Workload::w1) {
    fields = {Field{"obs", DType::float32, {4}}, Field{"act", DType::int64, {}},
              Field{"rew", DType::float32, {}}, Field{"next_obs", DType::float32, {4}},
              Field{"done", DType::uint8, {}}};
  } else {
    fields = {Field{"obs", DType::uint8, {4, 84, 84}}, Field{"act", DType::int32, {}},
              Field{"rew", DType::float32, {}}, Field{"next_obs", DType::uint8, {4, 84, 84}},
              Field{"done", DType::uint8, {}}};
  }
  return Schema::create(std::move(fields)).value();
}

std::uint32_t capacity_items(Workload workload) {
  return workload == Workload::w1 ? 1'000'000 : 10'000;
}

std::string workload_name(Workload workload) {
  return workload == Workload::w1 ? std::string("w1_table") : std::string("w2_table");
}

// Random bytes for n items, one column per field (content does not affect speed; random
// bytes keep every page of the table really written).
struct Columns {
  std::vector<std::vector<std::byte>> data;
  std::vector<std::span<const std::byte>> spans;
};

Columns random_columns(const Schema& schema, std::uint64_t n, Rng& rng) {
  Columns columns;
  for (const auto& field : schema.fields()) {
    auto& column = columns.data.emplace_back(n * field.item_bytes());
    for (auto& byte : column)
      byte = static_cast<std::byte>(rng.next());
  }
  columns.spans.assign(columns.data.begin(), columns.data.end());
  return columns;
}

// Output buffers for a sample of n items.
struct SampleOutput {
  std::vector<std::uint64_t> keys;
  std::vector<double> probabilities;
  std::vector<double> weights;
  std::vector<std::uint32_t> times_sampled;
  std::vector<std::vector<std::byte>> data;
  std::vector<std::span<std::byte>> columns;

  SampleOutput(const Schema& schema, std::uint64_t n)
      : keys(n), probabilities(n), weights(n), times_sampled(n) {
    for (const auto& field : schema.fields())
      data.emplace_back(n * field.item_bytes());
    columns.assign(data.begin(), data.end());
  }
  SampleBuffers buffers() {
    return SampleBuffers{keys, probabilities, weights, times_sampled, columns};
  }
};

// The full table of the last (workload, sampler) asked for. Consecutive benchmarks share it;
// asking for another one frees the old table first (a W2 table takes 565 MB) and fills the
// new one, all before the caller's timed loop.
Table& full_table(Workload workload, SelectorKind sampler) {
  static std::unique_ptr<Table> table;
  static Workload table_workload;
  static SelectorKind table_sampler;
  if (table && table_workload == workload && table_sampler == sampler) return *table;
  table.reset();

  TableConfig config;
  config.name = workload_name(workload);
  config.schema = make_schema(workload);
  config.capacity = capacity_items(workload);
  config.sampler = SelectorConfig{sampler, 0.6};
  config.remover = SelectorKind::fifo;
  config.rate_limiter = RateLimiterConfig::min_size(1);
  config.seed = 1;
  table = std::move(Table::create(config)).value();
  table_workload = workload;
  table_sampler = sampler;

  Rng rng(2);
  const std::uint64_t batch = workload == Workload::w1 ? 1000 : 50;
  const Columns columns = random_columns(config.schema, batch, rng);
  std::vector<double> priorities(batch);
  std::vector<std::uint64_t> keys(batch);
  for (std::uint64_t done = 0; done < config.capacity; done += batch) {
    for (auto& priority : priorities)
      priority = 0.01 + rng.uniform_double();
    if (!table->insert(columns.spans, batch, priorities, keys).ok()) std::abort();
  }
  return *table;
}

void set_counts(benchmark::State& state, std::uint64_t items_per_call,
                std::uint64_t bytes_per_item) {
  const auto items = static_cast<std::int64_t>(state.iterations() * items_per_call);
  state.SetItemsProcessed(items);
  state.SetBytesProcessed(items * static_cast<std::int64_t>(bytes_per_item));
}

// Inserts state.range(0) items per call into the full table (each evicts the oldest item).
void BM_Insert(benchmark::State& state, Workload workload) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  Table& table = full_table(workload, SelectorKind::uniform);
  Rng rng(3);
  const Columns columns = random_columns(table.schema(), n, rng);
  std::vector<std::uint64_t> keys(n);
  for (auto _ : state) {
    if (!table.insert(columns.spans, n, {}, keys).ok()) {
      state.SkipWithError("insert failed");
      break;
    }
  }
  set_counts(state, n, table.schema().item_bytes());
}

// Samples a batch of state.range(0) items (beta 0.4 for the prioritized sampler).
void BM_Sample(benchmark::State& state, Workload workload, SelectorKind sampler) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  Table& table = full_table(workload, sampler);
  SampleOutput out(table.schema(), n);
  const SampleBuffers buffers = out.buffers();
  const double beta = sampler == SelectorKind::prioritized ? 0.4 : 0.0;
  for (auto _ : state) {
    if (!table.sample(n, beta, buffers).ok()) {
      state.SkipWithError("sample failed");
      break;
    }
    benchmark::ClobberMemory();
  }
  set_counts(state, n, table.schema().item_bytes());
}

// Updates the priorities of state.range(0) live keys per call; bytes count the request
// (8-byte key + 8-byte priority per update).
void BM_UpdatePriorities(benchmark::State& state, Workload workload) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  Table& table = full_table(workload, SelectorKind::prioritized);
  SampleOutput out(table.schema(), n);
  if (!table.sample(n, 0.0, out.buffers()).ok()) std::abort();  // n live keys, spread out
  Rng rng(4);
  constexpr std::size_t kRounds = 16;
  std::vector<std::vector<double>> priorities(kRounds, std::vector<double>(n));
  for (auto& round : priorities) {
    for (auto& priority : round)
      priority = 0.01 + 10 * rng.uniform_double();
  }
  std::size_t round = 0;
  for (auto _ : state) {
    const auto outcome = table.update_priorities(out.keys, priorities[round++ % kRounds]);
    if (!outcome.ok() || outcome->applied != n) {
      state.SkipWithError("update failed");
      break;
    }
  }
  set_counts(state, n, sizeof(std::uint64_t) + sizeof(double));
}

// Copies the rows a W2 sample of state.range(0) copies, row by row from random slots of the
// same full table into the same output layout, with nothing else: the bandwidth ceiling
// that BM_Sample on W2 can approach.
void BM_MemcpyBaseline(benchmark::State& state, Workload workload) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  Table& table = full_table(workload, SelectorKind::uniform);
  const Storage& storage = table.storage();
  const std::size_t fields = table.schema().size();
  SampleOutput out(table.schema(), n);
  constexpr std::size_t kBatches = 1024;
  std::vector<std::uint32_t> slots(kBatches * n);
  Rng rng(5);
  for (auto& slot : slots)
    slot = static_cast<std::uint32_t>(rng.uniform_below(storage.capacity()));
  std::size_t batch = 0;
  for (auto _ : state) {
    const std::uint32_t* rows = &slots[(batch++ % kBatches) * n];
    for (std::uint64_t i = 0; i < n; ++i) {
      for (std::size_t f = 0; f < fields; ++f) {
        const std::uint64_t bytes = storage.item_bytes(f);
        std::memcpy(out.columns[f].data() + i * bytes, storage.cell(f, rows[i]), bytes);
      }
    }
    benchmark::ClobberMemory();
  }
  set_counts(state, n, table.schema().item_bytes());
}

// Writes state.range(0) W2 observation cells (28,224 bytes) per iteration into successive
// rows of a 10,000-row column (282 MB, far more than the cache holds), as an insert's
// store_row does: with stream_cell (non-temporal stores) or with memcpy. The ratio of the two
// is what streaming gains the server per inserted byte.
void BM_StoreLargeCells(benchmark::State& state, bool streamed) {
  constexpr std::uint64_t kCellBytes = 4 * 84 * 84;
  constexpr std::uint64_t kRows = 10'000;
  const auto n = static_cast<std::uint64_t>(state.range(0));
  static std::vector<std::byte> column(kRows * kCellBytes, std::byte{1});
  std::vector<std::byte> source(n * kCellBytes, std::byte{7});
  std::uint64_t row = 0;
  for (auto _ : state) {
    for (std::uint64_t i = 0; i < n; ++i, row = (row + 1) % kRows) {
      std::byte* to = column.data() + row * kCellBytes;
      if (streamed)
        stream_cell(to, source.data() + i * kCellBytes, kCellBytes);
      else
        std::memcpy(to, source.data() + i * kCellBytes, kCellBytes);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * kCellBytes));
}

// ---- Episodic W1 table: 1,000,000 steps of 8 interleaved environments whose episodes end
// every 100 to 300 steps (one in four truncated), filled before timing.
struct EpisodicFill {
  std::unique_ptr<Table> table;
  std::vector<std::uint64_t> open;  // one open episode per environment
};

EpisodicFill& episodic_table() {
  static EpisodicFill fill;
  if (fill.table) return fill;
  TableConfig config;
  config.name = "w1_episodes";
  config.schema = make_schema(Workload::w1);
  config.capacity = capacity_items(Workload::w1);
  config.sampler = SelectorConfig{SelectorKind::uniform, 0.6};
  config.remover = SelectorKind::fifo;
  config.rate_limiter = RateLimiterConfig::min_size(1);
  config.seed = 1;
  config.episodes.enabled = true;
  config.episodes.reward_field = "rew";
  config.episodes.bootstrap_fields = {"next_obs"};
  fill.table = std::move(Table::create(config)).value();
  Rng rng(2);
  constexpr std::uint64_t kEnvs = 8;
  const Columns columns = random_columns(config.schema, kEnvs, rng);
  std::vector<std::uint64_t> keys(kEnvs);
  std::vector<std::uint64_t> left(kEnvs);
  for (std::uint64_t env = 0; env < kEnvs; ++env) {
    fill.open.push_back(fill.table->episodic()->open_episode(0).value());
    left[env] = 100 + rng.uniform_below(200);
  }
  for (std::uint64_t done = 0; done < config.capacity; done += kEnvs) {
    if (!fill.table->episodic()->append_steps(0, fill.open, columns.spans, kEnvs, {}, keys).ok())
      std::abort();
    for (std::uint64_t env = 0; env < kEnvs; ++env) {
      if (--left[env] != 0) continue;
      const auto how = rng.uniform_below(4) == 0 ? EpisodeEnd::truncated : EpisodeEnd::terminated;
      if (!fill.table->episodic()->end_episode(0, fill.open[env], how).ok()) std::abort();
      fill.open[env] = fill.table->episodic()->open_episode(0).value();
      left[env] = 100 + rng.uniform_below(200);
    }
  }
  return fill;
}

// n-step samples of state.range(0) transitions with k = state.range(1); the window index is
// built before timing. Compare with BM_Sample/W1_uniform (a plain sample of the same rows).
void BM_NStep(benchmark::State& state) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  const auto k = static_cast<std::uint32_t>(state.range(1));
  Table& table = *episodic_table().table;
  SampleOutput out(table.schema(), n);
  std::vector<float> returns(n);
  std::vector<float> bootstrap(4 * n);
  std::vector<double> discounts(n);
  std::vector<std::uint32_t> steps(n);
  std::vector<std::span<std::byte>> bootstrap_columns{std::as_writable_bytes(std::span(bootstrap))};
  const NStepBuffers buffers{out.buffers(), std::as_writable_bytes(std::span(returns)),
                             bootstrap_columns, discounts, steps};
  const NStepRequest request{k, 0.99, 0.0};
  if (!table.episodic()->nstep_starts(request).ok()) std::abort();
  for (auto _ : state) {
    if (!table.episodic()->sample_nstep(n, request, buffers).ok()) {
      state.SkipWithError("n-step sample failed");
      break;
    }
    benchmark::ClobberMemory();
  }
  set_counts(state, n, table.schema().item_bytes());
}

// state.range(0) sequences of state.range(1) steps (stride 1, no burn-in, no padding).
void BM_Sequences(benchmark::State& state) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  const auto length = static_cast<std::uint32_t>(state.range(1));
  Table& table = *episodic_table().table;
  SampleOutput out(table.schema(), n * length);
  std::vector<std::uint8_t> mask(n * length);
  const SequenceBuffers buffers{std::span(out.keys).first(n),
                                std::span(out.probabilities).first(n),
                                std::span(out.weights).first(n),
                                std::span(out.times_sampled).first(n),
                                out.columns,
                                mask};
  const SequenceRequest request{length, 1, 0, false, 0.0};
  if (!table.episodic()->sequence_starts(request).ok()) std::abort();
  for (auto _ : state) {
    if (!table.episodic()->sample_sequences(n, request, buffers).ok()) {
      state.SkipWithError("sequence sample failed");
      break;
    }
    benchmark::ClobberMemory();
  }
  set_counts(state, n * length, table.schema().item_bytes());
}

// Appends state.range(0) steps per call across 8 environments to the full episodic table
// (each evicts the oldest step), with the window indexes of the benchmarks above kept.
void BM_AppendSteps(benchmark::State& state) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  EpisodicFill& fill = episodic_table();
  Table& table = *fill.table;
  Rng rng(3);
  const Columns columns = random_columns(table.schema(), n, rng);
  std::vector<std::uint64_t> episodes(n);
  for (std::uint64_t i = 0; i < n; ++i)
    episodes[i] = fill.open[i % fill.open.size()];
  std::vector<std::uint64_t> keys(n);
  for (auto _ : state) {
    if (!table.episodic()->append_steps(0, episodes, columns.spans, n, {}, keys).ok()) {
      state.SkipWithError("append failed");
      break;
    }
  }
  set_counts(state, n, table.schema().item_bytes());
}

// The checksum every file-tier record is checked with when read, over one W2 row, with the
// CPU's crc32 instruction (three streams) and with the table the library falls back to.
void BM_Crc32c(benchmark::State& state, bool portable) {
  Rng rng(5);
  std::vector<std::byte> row(static_cast<std::size_t>(state.range(0)));
  for (auto& b : row)
    b = std::byte(rng.next() & 0xff);
  for (auto _ : state) {
    benchmark::DoNotOptimize(portable ? crc32c_extend_portable(0, row) : crc32c(row));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * row.size()));
}

// Registration order groups benchmarks by table, so each table is filled once per run.
BENCHMARK_CAPTURE(BM_Insert, W1, Workload::w1)->Arg(1)->Arg(64);
BENCHMARK_CAPTURE(BM_Sample, W1_uniform, Workload::w1, SelectorKind::uniform)->Arg(256);
BENCHMARK_CAPTURE(BM_Sample, W1_prioritized, Workload::w1, SelectorKind::prioritized)->Arg(256);
BENCHMARK_CAPTURE(BM_UpdatePriorities, W1, Workload::w1)->Arg(256);
BENCHMARK(BM_NStep)->Args({256, 1})->Args({256, 3})->Args({256, 10});
BENCHMARK(BM_Sequences)->Args({64, 80});
BENCHMARK(BM_AppendSteps)->Arg(64);
BENCHMARK_CAPTURE(BM_Insert, W2, Workload::w2)->Arg(1)->Arg(64);
BENCHMARK_CAPTURE(BM_Sample, W2_uniform, Workload::w2, SelectorKind::uniform)->Arg(32);
BENCHMARK_CAPTURE(BM_MemcpyBaseline, W2, Workload::w2)->Arg(32);
BENCHMARK_CAPTURE(BM_StoreLargeCells, memcpy, false)->Arg(64);
BENCHMARK_CAPTURE(BM_StoreLargeCells, streamed, true)->Arg(64);
BENCHMARK_CAPTURE(BM_Sample, W2_prioritized, Workload::w2, SelectorKind::prioritized)->Arg(32);
BENCHMARK_CAPTURE(BM_Crc32c, hardware, false)->Arg(56457);
BENCHMARK_CAPTURE(BM_Crc32c, table, true)->Arg(56457);

}  // namespace
}  // namespace replayd

BENCHMARK_MAIN();
