#include "core/table/table.h"

#include <algorithm>

#include "core/table/episodic_table.h"

#include "core/number_text.h"

#include <cmath>
#include <cstring>

#include "core/storage/copy_cell.h"
#include "core/storage/stream_cell.h"
#include "core/storage/zstd_value.h"

namespace replayd {
namespace {

Error invalid(const std::string& table, std::string message) {
  return make_error(ErrorCode::invalid_argument, "table '" + table + "': " + std::move(message));
}

// Every priority finite, >= 0, and giving the sampler a finite mass (Selector::check_priority).
// A prioritized remover evicts with probability proportional to priority^1.
constexpr double kRemoverPriorityExponent = 1.0;

// Every priority finite, >= 0 and accepted by both selectors (see check_priority).
Status check_priorities(const std::string& table, const Selector& sampler, const Selector& remover,
                        std::span<const double> priorities) {
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    const double p = priorities[i];
    if (!std::isfinite(p) || p < 0) {
      return invalid(table, "priorities[" + std::to_string(i) + "] is " + number_text(p) +
                                ": priorities must be finite and >= 0");
    }
    if (auto status = sampler.check_priority(p); !status) {
      return invalid(table, "priorities[" + std::to_string(i) + "]: " + status.error().message);
    }
    if (auto status = remover.check_priority(p); !status) {
      return invalid(table,
                     "priorities[" + std::to_string(i) + "]: remover: " + status.error().message);
    }
  }
  return Ok{};
}

}  // namespace

Result<std::unique_ptr<Table>> Table::create(TableConfig config, std::uint64_t max_table_bytes,
                                             ColumnMemorySource* memory) {
  if (auto status = validate_table_config(config, max_table_bytes); !status) {
    return status.error();
  }
  const std::string who = "table '" + config.name + "': ";
  auto limiter = RateLimiter::create(config.rate_limiter);
  if (!limiter) return make_error(limiter.error().code, who + limiter.error().message);
  auto sampler = make_selector(config.sampler, config.capacity);
  if (!sampler)
    return make_error(sampler.error().code, who + "sampler: " + sampler.error().message);
  auto remover =
      make_selector(SelectorConfig{config.remover, kRemoverPriorityExponent}, config.capacity);
  if (!remover)
    return make_error(remover.error().code, who + "remover: " + remover.error().message);
  const std::uint64_t block_bytes = StorageLayout::of(config.schema, config.capacity).total_bytes;
  auto block = memory != nullptr ? memory->allocate(config.name, block_bytes)
                                 : allocate_private_column_memory(config.name, block_bytes);
  if (!block) return block.error();
  return std::unique_ptr<Table>(new Table(std::move(config), std::move(block).value(),
                                          std::move(limiter).value(), std::move(sampler).value(),
                                          std::move(remover).value()));
}

Table::~Table() = default;

Table::Table(TableConfig config, std::unique_ptr<ColumnMemory> memory, RateLimiter rate_limiter,
             std::unique_ptr<Selector> sampler, std::unique_ptr<Selector> remover)
    : config_(std::move(config)),
      storage_(config_.schema, config_.capacity, std::move(memory)),
      rate_limiter_(rate_limiter),
      sampler_(std::move(sampler)),
      remover_(std::move(remover)),
      rng_(config_.seed),
      blob_budget_(compressed_budget(config_)),
      replay_(config_.capacity) {
  if (config_.episodes.enabled) episodic_ = std::make_unique<EpisodicTable>(*this);
  if (config_.file_tier.enabled()) {
    tier_ = std::make_unique<TierIndex>(config_.capacity, file_tier_ram_rows(config_));
    tier_field_bytes_ = file_tier_field_bytes(config_);
  }
}

bool Table::may_insert(std::uint64_t n) const {
  return rate_limiter_.may_insert(n) && !tier_behind();
}

std::uint64_t Table::given_back_bytes() const {
  if (!tier_) return 0;
  constexpr std::uint64_t kPage = StorageLayout::kAlignment;
  const std::uint64_t stamps = (std::uint64_t{config_.capacity} * 8 + kPage - 1) / kPage * kPage;
  const std::uint64_t columns = storage_.layout().total_bytes - stamps;
  // Fields a tier leaves in RAM (an episodic table's reward) keep their cells for every row.
  std::uint64_t written = 0;
  for (std::uint64_t bytes : tier_field_bytes_)
    written += bytes;
  const std::uint64_t kept = fixed_row_bytes(config_.schema) - written;
  const std::uint64_t held = tier_->hot_rows() * written + std::uint64_t{size()} * kept +
                             2 * StorageLayout::kAlignment * config_.schema.size() +
                             tier_->hot_order_entries() * sizeof(SpillRow) +
                             std::uint64_t{config_.capacity} * kFileTierBytesPerSlot;
  return columns > held ? columns - held : 0;
}

bool Table::tier_behind() const {
  return tier_ && tier_->hot_rows() > tier_->ram_rows() + kFileTierSlackRows;
}

std::vector<SpillRow> Table::choose_spill(std::uint64_t most) {
  if (!tier_) return {};
  return tier_->choose_spill(
      most, [&](std::uint32_t slot) { return storage_.occupied(slot) ? storage_.key(slot) : 0; });
}

void Table::finish_spill(std::span<const SpillRow> rows, std::span<const ColdLocation> where) {
  std::vector<std::uint32_t> cold_slots;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SpillRow& row = rows[i];
    if (!storage_.occupied(row.slot) || storage_.key(row.slot) != row.key) continue;  // removed
    tier_->on_spilled(row.slot, where[i]);
    storage_.unpublish(row.slot);
    cold_slots.push_back(row.slot);
  }
  std::sort(cold_slots.begin(), cold_slots.end());
  // Give back the pages of each run of consecutive cold slots, with the edge pages they
  // share with cold neighbours.
  const auto given_back = [&](std::uint32_t slot) { return tier_->cold(slot); };
  for (std::size_t begin = 0; begin < cold_slots.size();) {
    std::size_t end = begin + 1;
    while (end < cold_slots.size() && cold_slots[end] == cold_slots[end - 1] + 1)
      ++end;
    storage_.discard_cells(cold_slots[begin], cold_slots[end - 1], tier_field_bytes_, given_back);
    begin = end;
  }
}

void Table::abandon_spill(std::span<const SpillRow> rows) {
  for (auto row = rows.rbegin(); row != rows.rend(); ++row) {
    if (storage_.occupied(row->slot) && storage_.key(row->slot) == row->key)
      tier_->on_spill_failed(*row);
  }
}

std::vector<MoveRow> Table::choose_moves(std::uint32_t segment, std::uint64_t most_rows,
                                         std::uint64_t most_bytes) {
  if (!tier_) return {};
  return tier_->choose_moves(segment, most_rows, most_bytes);
}

void Table::finish_moves(std::span<const MoveRow> rows, std::span<const ColdLocation> to) {
  for (std::size_t i = 0; i < rows.size(); ++i)
    tier_->on_moved(rows[i], to[i]);
}

void Table::abandon_moves(std::span<const MoveRow> rows) {
  tier_->on_move_failed(rows);
}

bool Table::may_sample(std::uint64_t n, std::uint64_t min_version) const {
  if (storage_.size() == 0 || !rate_limiter_.may_sample(n)) return false;
  if (min_version != 0) {
    const auto needed = static_cast<std::uint64_t>(
        std::max<std::int64_t>(1, config_.rate_limiter.min_size_to_sample));
    if (versions_.count_at_least(min_version) < needed) return false;
  }
  return config_.max_times_sampled == 0 || draws_left_ >= n;
}

Status Table::check_min_version() const {
  if (config_.max_times_sampled == 0) return Ok{};
  return make_error(ErrorCode::failed_precondition,
                    "table '" + name() +
                        "' has max_times_sampled: a sample cannot be bounded by min_version "
                        "(a batch could retire every eligible item midway); sample it without "
                        "min_version or max_staleness");
}

const Selector& Table::sampler_for(std::uint64_t min_version) {
  if (min_version == 0 || versions_.count_at_least(min_version) == storage_.size()) {
    return *sampler_;
  }
  if (const Selector* built = versions_.eligible_for(min_version)) return *built;
  std::unique_ptr<Selector> made;
  if (!versions_.holds_eligible()) {
    // The configuration was validated at creation: make_selector cannot fail here.
    made = std::move(make_selector(config_.sampler, config_.capacity)).value();
  }
  Selector& eligible = versions_.rebuild_eligible(min_version, std::move(made));
  sampler_->for_each_in_order([&](std::uint32_t slot) {
    if (storage_.version(slot) >= min_version) eligible.insert(slot, storage_.priority(slot));
  });
  return eligible;
}

std::uint64_t Table::drop_versions_below(std::uint64_t bound) {
  const auto oldest = versions_.min_version();
  if (!oldest || *oldest >= bound) return 0;
  std::uint64_t dropped = 0;
  for (std::uint32_t slot = 0; slot < storage_.capacity(); ++slot) {
    if (!storage_.occupied(slot) || storage_.version(slot) >= bound) continue;
    remove_item(slot);
    ++dropped;
  }
  counters_.version_drops += dropped;
  return dropped;
}

std::uint64_t Table::draws_left(std::uint32_t slot) const {
  return config_.max_times_sampled - storage_.times_sampled(slot);
}

void Table::remove_item(std::uint32_t slot) {
  if (episodic_) {
    episodic_->on_remove(slot);
  } else if (config_.max_times_sampled != 0) {
    draws_left_ -= draws_left(slot);
  }
  replay_.on_remove(storage_.times_sampled(slot));
  sampler_->remove(slot);
  remover_->remove(slot);
  versions_.on_remove(slot, storage_.version(slot));
  if (tier_) tier_->on_release(slot);
  storage_.release(slot);
  rate_limiter_.record_deletes(1);
}

Result<std::uint64_t> Table::check_frames(
    std::span<const std::span<const std::byte>> columns, std::uint64_t n,
    std::span<const std::span<const std::uint32_t>> frame_sizes) {
  const auto& fields = config_.schema.fields();
  if (!frame_sizes.empty() && frame_sizes.size() != fields.size()) {
    return invalid(name(), "frame sizes given for " + std::to_string(frame_sizes.size()) +
                               " fields, schema has " + std::to_string(fields.size()));
  }
  std::uint64_t cost = 0;
  for (std::size_t f = 0; f < fields.size(); ++f) {
    const bool compressed = fields[f].compression != Compression::none;
    const auto sizes = frame_sizes.empty() ? std::span<const std::uint32_t>{} : frame_sizes[f];
    if (!compressed) {
      if (!sizes.empty()) {
        return invalid(name(), "field '" + fields[f].name +
                                   "' is not compressed but frame sizes "
                                   "were given");
      }
      continue;
    }
    if (sizes.size() != n) {
      return invalid(name(), "field '" + fields[f].name + "' is compressed: " + std::to_string(n) +
                                 " rows need " + std::to_string(n) + " frame sizes, got " +
                                 std::to_string(sizes.size()));
    }
    std::uint64_t offset = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      if (sizes[i] > columns[f].size() - offset) {
        return invalid(name(), "field '" + fields[f].name +
                                   "': frame sizes add up to more than "
                                   "the column's " +
                                   std::to_string(columns[f].size()) + " bytes");
      }
      const auto frame = columns[f].subspan(offset, sizes[i]);
      if (auto status = check_zstd_frame(frame, fields[f].item_bytes()); !status) {
        return invalid(name(), "field '" + fields[f].name + "', row " + std::to_string(i) + ": " +
                                   status.error().message);
      }
      offset += sizes[i];
      cost += BlobColumn::cost(sizes[i]);
    }
    if (offset != columns[f].size()) {
      return invalid(name(), "field '" + fields[f].name + "': frame sizes add up to " +
                                 std::to_string(offset) + " bytes, the column holds " +
                                 std::to_string(columns[f].size()));
    }
  }
  if (cost > blob_budget_) {
    return invalid(name(), "the batch's compressed values take " + std::to_string(cost) +
                               " bytes, more than the table's max_compressed_bytes " +
                               std::to_string(blob_budget_));
  }
  return cost;
}

Result<std::uint64_t> Table::check_rows(
    std::span<const std::span<const std::byte>> columns, std::uint64_t n,
    std::span<const double> priorities, std::span<std::uint64_t> keys_out,
    std::span<const std::span<const std::uint32_t>> frame_sizes) {
  const auto& fields = config_.schema.fields();
  if (n == 0) return invalid(name(), "insert of 0 items");
  if (n > config_.capacity) {
    return invalid(name(), "insert of " + std::to_string(n) + " items exceeds capacity " +
                               std::to_string(config_.capacity));
  }
  if (columns.size() != fields.size()) {
    return invalid(name(), "insert has " + std::to_string(columns.size()) +
                               " columns, schema has " + std::to_string(fields.size()) + " fields");
  }
  for (std::size_t f = 0; f < fields.size(); ++f) {
    if (fields[f].compression != Compression::none) continue;  // check_frames
    if (columns[f].size() != n * fields[f].item_bytes()) {
      return invalid(name(), "field '" + fields[f].name + "': column holds " +
                                 std::to_string(columns[f].size()) + " bytes, " +
                                 std::to_string(n) + " items need " +
                                 std::to_string(n * fields[f].item_bytes()));
    }
  }
  if (!priorities.empty() && priorities.size() != n) {
    return invalid(name(), std::to_string(priorities.size()) + " priorities for " +
                               std::to_string(n) + " items");
  }
  if (keys_out.size() != n) return invalid(name(), "key output does not hold n keys");
  if (auto status = check_priorities(name(), *sampler_, *remover_, priorities); !status)
    return status.error();
  if (auto status = rate_limiter_.check_insert_batch(n); !status) {
    return invalid(name(), status.error().message);
  }
  return check_frames(columns, n, frame_sizes);
}

std::uint32_t Table::store_row(std::span<const std::span<const std::byte>> columns, std::uint64_t i,
                               std::span<const double> priorities,
                               std::span<const std::span<const std::uint32_t>> frame_sizes,
                               std::span<std::uint64_t> frame_offsets,
                               std::span<const std::uint64_t> versions) {
  std::uint64_t cost = 0;
  for (std::size_t f = 0; f < frame_sizes.size(); ++f)
    if (!frame_sizes[f].empty()) cost += BlobColumn::cost(frame_sizes[f][i]);
  // check_frames bounded a batch's cost by the budget, so emptying the table always fits.
  while (storage_.full() ||
         (cost != 0 && storage_.size() != 0 && storage_.blob_bytes() + cost > blob_budget_)) {
    remove_item(remover_->sample(rng_, 0.0).slot);
    ++counters_.evictions;
  }
  const std::uint32_t slot = storage_.acquire();
  for (std::size_t f = 0; f < columns.size(); ++f) {
    if (BlobColumn* blobs = storage_.blobs(f)) {
      const std::uint32_t size = frame_sizes[f][i];
      blobs->set(slot, columns[f].subspan(frame_offsets[f], size));
      frame_offsets[f] += size;
      continue;
    }
    const std::uint64_t bytes = storage_.item_bytes(f);
    stream_cell(storage_.cell(f, slot), columns[f].data() + i * bytes, bytes);
  }
  storage_.publish(slot);  // readers of the shared columns may take the row from now on
  if (tier_) tier_->on_store(slot, storage_.key(slot));
  double priority = max_priority_;
  if (!priorities.empty()) {
    priority = priorities[i];
    if (priority > max_priority_) max_priority_ = priority;
  }
  storage_.set_priority(slot, priority);
  sampler_->insert(slot, priority);
  remover_->insert(slot, priority);
  const std::uint64_t version = versions.empty()       ? 0
                                : versions.size() == 1 ? versions[0]
                                                       : versions[i];
  storage_.set_version(slot, version);
  versions_.on_store(slot, version, priority);
  // Callers add the batch to counters_.inserts after storing it: row i is insert inserts + i.
  replay_.on_store(slot, counters_.inserts + i, now_ms_, priority);
  return slot;
}

Status Table::check_versions(std::span<const std::uint64_t> versions, std::uint64_t n) const {
  if (versions.empty() || versions.size() == 1 || versions.size() == n) return Ok{};
  return invalid(name(), std::to_string(versions.size()) + " versions for " + std::to_string(n) +
                             " items: give one per item, one for all, or none");
}

Status Table::insert(std::span<const std::span<const std::byte>> columns, std::uint64_t n,
                     std::span<const double> priorities, std::span<std::uint64_t> keys_out,
                     std::span<const std::uint64_t> versions) {
  if (episodic_) {
    return make_error(ErrorCode::failed_precondition,
                      "table '" + name() + "' is episodic: store steps with append_steps");
  }
  REPLAYD_RETURN_IF_ERROR(check_rows(columns, n, priorities, keys_out));
  REPLAYD_RETURN_IF_ERROR(check_versions(versions, n));
  if (!rate_limiter_.may_insert(n)) {
    return make_error(ErrorCode::would_block,
                      "table '" + name() + "': insert held by rate limiter");
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint32_t slot = store_row(columns, i, priorities, {}, {}, versions);
    if (config_.max_times_sampled != 0) draws_left_ += config_.max_times_sampled;
    keys_out[i] = storage_.key(slot);
  }
  rate_limiter_.record_inserts(n);
  counters_.inserts += n;
  return Ok{};
}

Status Table::check_plain_sample() const {
  // An episodic table's steps are items too, unless frame fields need assembling or
  // max_times_sampled retires them (counted per window index, not here).
  if (episodic_ && (config_.schema.has_frames() || config_.max_times_sampled != 0)) {
    return make_error(ErrorCode::failed_precondition,
                      "table '" + name() +
                          "' is episodic with frame fields or max_times_sampled: sample it with "
                          "\"nstep\" (k = 1 is the plain transition) or with sample_sequences");
  }
  return Ok{};
}

Status Table::sample(std::uint64_t n, double beta, const SampleBuffers& out,
                     std::uint64_t min_version) {
  const auto& fields = config_.schema.fields();
  REPLAYD_RETURN_IF_ERROR(check_plain_sample());
  if (n == 0) return invalid(name(), "sample of 0 items");
  if (!std::isfinite(beta) || beta < 0) {
    return invalid(name(), "beta must be finite and >= 0, got " + std::to_string(beta));
  }
  const bool keys_only = out.columns.empty() && out.rows.empty();
  if (out.keys.size() != n || out.probabilities.size() != n || out.weights.size() != n ||
      out.times_sampled.size() != n || (!keys_only && out.columns.size() != fields.size()) ||
      (!out.versions.empty() && out.versions.size() != n)) {
    return invalid(name(), "sample output buffers do not match n and the schema");
  }
  for (std::size_t f = 0; !keys_only && f < fields.size(); ++f) {
    const bool copied = out.columns[f].size() == n * fields[f].item_bytes();
    const bool viewed = out.columns[f].empty() && f < out.rows.size() && out.rows[f].size() == n;
    if (!copied && !viewed) {
      return invalid(name(), "field '" + fields[f].name + "': output column has the wrong size");
    }
  }
  if (tier_) {
    bool viewed = false;
    for (std::size_t f = 0; !keys_only && f < fields.size(); ++f)
      viewed = viewed || out.columns[f].empty();
    if (keys_only || viewed || out.cold == nullptr) {
      return make_error(ErrorCode::failed_precondition,
                        "table '" + name() +
                            "' has a file tier: its rows are copied into the reply (cold ones "
                            "read back from disk), never read in place or from shared memory; "
                            "sample it with rows copied (\"rows\": \"copy\")");
    }
  }
  if (auto status = rate_limiter_.check_sample_batch(n); !status) {
    return invalid(name(), status.error().message);
  }
  if (config_.max_times_sampled != 0 &&
      n > std::uint64_t{config_.capacity} * config_.max_times_sampled) {
    return invalid(
        name(), "a sample of " + std::to_string(n) + " items exceeds capacity x max_times_sampled");
  }
  if (min_version != 0) REPLAYD_RETURN_IF_ERROR(check_min_version());
  if (!may_sample(n, min_version)) {
    return make_error(
        ErrorCode::would_block,
        "table '" + name() + "': sample held by rate limiter or too few items" +
            (min_version != 0 ? " of version >= " + std::to_string(min_version) : std::string()));
  }

  const Selector& selector = sampler_for(min_version);
  const std::size_t first_cold = out.cold != nullptr ? out.cold->size() : 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const Pick pick = selector.sample(rng_, beta);
    const std::uint32_t slot = pick.slot;
    const std::uint32_t times = storage_.times_sampled(slot) + 1;
    storage_.set_times_sampled(slot, times);
    out.keys[i] = storage_.key(slot);
    out.probabilities[i] = pick.probability;
    out.weights[i] = pick.weight;
    out.times_sampled[i] = times;
    if (!out.versions.empty()) out.versions[i] = storage_.version(slot);
    // Listed now: max_times_sampled may remove the row below, and a removed row is no
    // longer cold (its record stays readable: the caller takes its segment at once).
    if (!keys_only && cold(slot)) out.cold->push_back(ColdDraw{i, tier_->location(slot)});
    if (config_.max_times_sampled != 0) {
      --draws_left_;
      if (times >= config_.max_times_sampled) {
        remove_item(slot);
        ++counters_.expirations;
      }
    }
  }
  if (!keys_only) gather_rows(out, first_cold);
  observe_draws(out.keys);
  rate_limiter_.record_samples(n);
  counters_.samples += n;
  return Ok{};
}

void Table::gather_rows(const SampleBuffers& out, std::size_t first_cold) const {
  const std::uint64_t slot_mask = (std::uint64_t{1} << storage_.slot_bits()) - 1;
  const auto slot_of = [&](std::uint64_t row) {
    return static_cast<std::uint32_t>(out.keys[row] & slot_mask);
  };
  const std::size_t fields = config_.schema.size();
  const std::uint64_t n = out.keys.size();
  constexpr std::uint64_t kAhead = 8;  // rows between a prefetch and its copy
  std::size_t next_cold = first_cold;  // *out.cold lists this sample's rows in order
  for (std::uint64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      const std::uint32_t ahead = slot_of(i + kAhead);
      for (std::size_t f = 0; f < fields; ++f)
        if (!out.columns[f].empty()) __builtin_prefetch(storage_.cell(f, ahead));
    }
    const std::uint32_t slot = slot_of(i);
    if (out.cold != nullptr && next_cold < out.cold->size() && (*out.cold)[next_cold].row == i) {
      ++next_cold;  // its cells were given back: the caller reads it
      copy_kept_fields(slot, i, out.columns);
      continue;
    }
    copy_hot_row(slot, i, out.columns, out.rows);
  }
}

void Table::copy_hot_row(std::uint32_t slot, std::uint64_t row,
                         std::span<const std::span<std::byte>> columns,
                         std::span<const std::span<const std::byte*>> rows) const {
  for (std::size_t f = 0; f < columns.size(); ++f) {
    if (!columns[f].empty()) {
      const std::uint64_t bytes = storage_.item_bytes(f);
      copy_cell(columns[f].data() + row * bytes, storage_.cell(f, slot), bytes);
    } else if (f < rows.size() && !rows[f].empty()) {  // viewed in place
      rows[f][row] = storage_.cell(f, slot);
    }
  }
}

void Table::copy_or_list(std::uint32_t slot, std::uint64_t row,
                         std::span<const std::span<std::byte>> columns,
                         std::span<const std::span<const std::byte*>> rows,
                         std::vector<ColdDraw>* listed) const {
  if (cold(slot)) {  // its written-out cells were given back: the caller reads them
    listed->push_back(ColdDraw{row, tier_->location(slot)});
    copy_kept_fields(slot, row, columns);
    return;
  }
  copy_hot_row(slot, row, columns, rows);
}

void Table::copy_kept_fields(std::uint32_t slot, std::uint64_t row,
                             std::span<const std::span<std::byte>> columns) const {
  for (std::size_t f = 0; f < columns.size(); ++f) {
    if (tier_field_bytes_[f] != 0 || columns[f].empty() || storage_.blobs(f) != nullptr) continue;
    const std::uint64_t bytes = storage_.item_bytes(f);
    copy_cell(columns[f].data() + row * bytes, storage_.cell(f, slot), bytes);
  }
}

void Table::observe_draws(std::span<const std::uint64_t> keys) {
  const std::uint64_t slot_mask = (std::uint64_t{1} << storage_.slot_bits()) - 1;
  // Each draw's record is a cache miss of its own: a request contributes at most
  // kObservedDrawsPerRequest of its draws, every stride-th one (the draws of a batch are
  // alike, so the distributions stay unbiased; docs/OPERATIONS.md).
  const std::size_t stride = observed_stride(keys.size());
  constexpr std::size_t kAhead = 16;  // draws between a prefetch and its use
  for (std::size_t i = 0; i < keys.size(); i += stride) {
    if (i + kAhead * stride < keys.size())
      replay_.prefetch(static_cast<std::uint32_t>(keys[i + kAhead * stride] & slot_mask));
    const auto slot = static_cast<std::uint32_t>(keys[i] & slot_mask);
    if (replay_.knows_priority(slot)) {
      replay_.on_draw(slot, counters_.inserts, now_ms_);
    } else {
      replay_.on_draw(slot, counters_.inserts, now_ms_, storage_.priority(slot));
    }
    if (policy_version_) {
      const std::uint64_t version = storage_.version(slot);
      replay_.on_draw_staleness(*policy_version_ > version ? *policy_version_ - version : 0);
    }
  }
}

Result<UpdateOutcome> Table::update_priorities(std::span<const std::uint64_t> keys,
                                               std::span<const double> priorities) {
  if (keys.size() != priorities.size()) {
    return invalid(name(), std::to_string(keys.size()) + " keys but " +
                               std::to_string(priorities.size()) + " priorities");
  }
  if (auto status = check_priorities(name(), *sampler_, *remover_, priorities); !status)
    return status.error();
  UpdateOutcome outcome;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto slot = storage_.find(keys[i]);
    if (!slot) {
      ++outcome.stale;
      continue;
    }
    replay_.on_update(*slot, counters_.inserts, priorities[i]);
    storage_.set_priority(*slot, priorities[i]);
    sampler_->update(*slot, priorities[i]);
    remover_->update(*slot, priorities[i]);
    versions_.on_update(*slot, storage_.version(*slot), priorities[i]);
    if (episodic_) episodic_->on_priority(*slot);
    if (priorities[i] > max_priority_) max_priority_ = priorities[i];
    ++outcome.applied;
  }
  counters_.priority_updates += outcome.applied;
  counters_.stale_updates += outcome.stale;
  return outcome;
}

DeleteOutcome Table::delete_keys(std::span<const std::uint64_t> keys) {
  DeleteOutcome outcome;
  for (auto key : keys) {
    const auto slot = storage_.find(key);
    if (!slot) {
      ++outcome.stale;
      continue;
    }
    remove_item(*slot);
    ++outcome.deleted;
  }
  counters_.deletes += outcome.deleted;
  counters_.stale_deletes += outcome.stale;
  return outcome;
}

void Table::reset() {
  for (std::uint32_t slot = 0; slot < storage_.capacity(); ++slot) {
    if (storage_.occupied(slot)) replay_.on_remove(storage_.times_sampled(slot));
  }
  replay_.on_reset(storage_.size());
  storage_.clear();
  if (tier_) tier_->clear();
  sampler_->clear();
  remover_->clear();
  versions_.clear();
  rate_limiter_.reset();
  draws_left_ = 0;
  if (episodic_) episodic_->clear();
  max_priority_ = 1.0;
}

TableInfo Table::info() const {
  return TableInfo{storage_.size(),
                   config_.capacity,
                   counters_,
                   rate_limiter_.counters(),
                   max_priority_,
                   replay_.histograms(),
                   episodic_ ? episodic_->history_steps() : 0};
}

}  // namespace replayd
