// Table: one named replay table: schema, columnar storage, a sampling selector, a remover
// for eviction, max_times_sampled, a rate limiter and a seeded RNG.
// Threading: not thread-safe. The server calls every method from its io_context thread.
// Blocking: never. When the rate limiter does not admit an insert or a sample, the call
// fails with ErrorCode::would_block and changes nothing; the caller decides to wait
// (may_insert / may_sample tell in advance).
// Failure atomicity: every error leaves the table exactly as it was; input is validated
// completely before anything is stored. (A window index built by a sampling call that then
// fails stays built: it is a cache that changes no draw.)
// Episodic tables (config.episodes.enabled) store steps of episodes instead of free items:
// writers open episodes, append steps, end them; samples are n-step transitions or
// sequences over valid start steps. The rules are in docs/TRAJECTORIES.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/result.h"
#include "core/rng.h"
#include "core/selectors/selector.h"
#include "core/storage/storage.h"
#include "core/table/rate_limiter.h"
#include "core/table/replay_stats.h"
#include "core/table/table_config.h"
#include "core/table/version_index.h"
#include "core/tier/tier_index.h"

namespace replayd {

struct TableCounters {
  std::uint64_t inserts = 0;           // items inserted
  std::uint64_t samples = 0;           // items sampled (a batch of n counts n)
  std::uint64_t priority_updates = 0;  // updates applied
  std::uint64_t stale_updates = 0;     // updates aimed at keys no longer stored (ignored)
  std::uint64_t deletes = 0;           // items deleted by request
  std::uint64_t stale_deletes = 0;     // deletes aimed at keys no longer stored (ignored)
  std::uint64_t evictions = 0;         // items removed to make room
  std::uint64_t expirations = 0;       // items removed after max_times_sampled samples
  std::uint64_t version_drops = 0;     // items dropped behind a version (drop_versions_below)
  bool operator==(const TableCounters&) const = default;
};

struct TableInfo {
  std::uint64_t size = 0;
  std::uint64_t capacity = 0;
  TableCounters counters;
  RateLimiterCounters rate_limiter;
  double max_priority = 1.0;
  ReplayHistograms replay;  // see core/table/replay_stats.h
  // Episodic tables without history padding: stored steps that only hold the history of
  // later ones (the first max_stack - 1 of their episode), never drawn.
  std::uint64_t history_steps = 0;
};

// Where a cold row's fields go: the output's columns, or (an n-step draw's step t+h-1) its
// bootstrap columns, NStepBuffers::bootstrap, which receive only the bootstrap fields.
enum class ColdTarget : std::uint8_t { columns, bootstrap };

// A drawn row that lies in a file tier's segment (SampleBuffers::cold): the caller reads its
// record into row `row` of the target's columns. Its fields that stay in RAM
// (Table::tier_field_bytes() 0) were copied already.
struct ColdDraw {
  std::uint64_t row = 0;  // its index in the sample (in a sequence sample, of the n x T rows)
  ColdLocation where;
  ColdTarget target = ColdTarget::columns;
};

// Caller-owned destination for a sample of n items. Every span holds exactly n values;
// columns holds one span per schema field, in schema order, of n * item_bytes bytes.
// The spans are only borrowed for the duration of sample().
// A field may instead be viewed in place: its column left empty and rows[field] holding n
// pointers, which sample() sets to the stored values of the draws. Such a pointer stays
// valid, and its bytes unchanged, only until the table's next insert, delete, reset or
// restore (or its destruction): a caller must copy or send them before then.
// Keys only: columns and rows both empty; no field is copied (the caller's client reads the
// rows from the shared column block, checking each slot's stamp, docs/SHM.md).
struct SampleBuffers {
  std::span<std::uint64_t> keys;
  std::span<double> probabilities;
  std::span<double> weights;
  std::span<std::uint32_t> times_sampled;  // count after this sample, so >= 1
  std::span<const std::span<std::byte>> columns;
  std::span<const std::span<const std::byte*>> rows = {};  // per field, where columns[f] is empty
  std::span<std::uint64_t> versions = {};  // n: each draw's policy version; empty: not asked
  // A table with a file tier: the draws whose row is cold, which sample() leaves out of
  // `columns` and appends here (row index, where it lies) for the caller to read back.
  // Required for such a table (and its fields copied, not viewed); ignored otherwise.
  std::vector<ColdDraw>* cold = nullptr;
};

struct UpdateOutcome {
  std::uint64_t applied = 0;
  std::uint64_t stale = 0;
};

struct DeleteOutcome {
  std::uint64_t deleted = 0;
  std::uint64_t stale = 0;
};

// How an episode ended: terminated (no bootstrap past its last step) or truncated (a time
// limit: bootstrap from the final observation).
enum class EpisodeEnd { terminated, truncated };

class EpisodicTable;

class Table {
 public:
  // Validates `config` (see validate_table_config, selector and rate limiter rules) and
  // allocates storage for `capacity` items: its column block from `memory` (not owned; used
  // only during the call), or private memory when null.
  static Result<std::unique_ptr<Table>> create(
      TableConfig config, std::uint64_t max_table_bytes = kDefaultMaxTableBytes,
      ColumnMemorySource* memory = nullptr);
  static constexpr std::uint64_t kDefaultMaxTableBytes = std::uint64_t{64} << 30;
  ~Table();

  const TableConfig& config() const { return config_; }
  const std::string& name() const { return config_.name; }
  const Schema& schema() const { return config_.schema; }
  std::uint32_t size() const { return storage_.size(); }

  // Whether the rate limiter and the stored items admit an insert / a sample of n now. A
  // sample bounded by min_version (> 0) also needs max(1, min_size_to_sample) stored items
  // of version >= min_version (docs/VERSIONS.md).
  bool may_insert(std::uint64_t n) const;
  bool may_sample(std::uint64_t n, std::uint64_t min_version = 0) const;

  // Stores n items. columns: one span per field in schema order, each n * item_bytes bytes,
  // C order. priorities: empty (every item gets the largest priority seen so far) or n
  // finite values >= 0. keys_out: n slots that receive the new keys in order.
  // When full, the remover evicts one item per new item. n must not exceed capacity.
  // versions: the policy version of each item (n values), of every item (1 value), or none
  // (empty: version 0).
  // Errors: invalid_argument (shape of input, bad priority, n out of range, a batch the
  // rate limiter could never admit), would_block. Cost: O(n * (item bytes + log capacity)).
  Status insert(std::span<const std::span<const std::byte>> columns, std::uint64_t n,
                std::span<const double> priorities, std::span<std::uint64_t> keys_out,
                std::span<const std::uint64_t> versions = {});

  // Draws n items one after another (with replacement unless max_times_sampled removes an
  // item mid-batch) and copies each row straight into `out`. beta: importance-sampling
  // exponent, finite, >= 0. min_version > 0 draws only items of version >= min_version, as
  // the sampler would from those items alone: probabilities and importance weights are over
  // them (VersionIndex's eligible sampler, built at the first such draw and kept while the
  // bound stays; building it is O(size log capacity)).
  // Errors: invalid_argument, failed_precondition (min_version with max_times_sampled),
  // would_block. Cost: O(n * (item bytes + log capacity)), no allocation but that build.
  // A table with a file tier leaves its cold draws to the caller (SampleBuffers::cold);
  // failed_precondition when `out` has nowhere to list them or views a field.
  Status sample(std::uint64_t n, double beta, const SampleBuffers& out,
                std::uint64_t min_version = 0);
  // Whether sample() may draw this table's items: failed_precondition for an episodic table
  // with frame fields or max_times_sampled (its transitions are n-step draws). O(1).
  Status check_plain_sample() const;

  // Sets priorities (finite, >= 0) of the items whose keys are still stored; stale keys are
  // counted and ignored. All priorities are validated first: one bad value rejects the call.
  Result<UpdateOutcome> update_priorities(std::span<const std::uint64_t> keys,
                                          std::span<const double> priorities);

  // Removes the items whose keys are still stored; stale keys are counted and ignored.
  DeleteOutcome delete_keys(std::span<const std::uint64_t> keys);

  // Run-time changes (the service's configure_table). Each validates first and changes
  // nothing on error (invalid_argument naming the problem).
  // A new rate limiter (RateLimiter::reconfigure: the counters carry on or are rebased so
  // that items stored before are not charged). Callers wake the table's waiters. O(1).
  Status set_rate_limiter(const RateLimiterConfig& config);
  // What set_rate_limiter would refuse, changing nothing. O(1).
  Status check_rate_limiter(const RateLimiterConfig& config) const;
  // A prioritized sampler's exponent: every stored item's mass becomes priority^exponent
  // (its priority is kept). failed_precondition unless the sampler is prioritized. An
  // episodic table's window indexes are built again when next asked for. O(size log size).
  Status set_priority_exponent(double exponent);

  // Policy versions (docs/VERSIONS.md). The version of the value the table follows
  // (config().versions.value), set by the service at each publish of it and at start: the
  // staleness of each recorded draw is measured against it. O(1).
  void set_policy_version(std::uint64_t version) { policy_version_ = version; }
  std::optional<std::uint64_t> policy_version() const { return policy_version_; }
  // Removes every stored item of version < bound (counted in version_drops and as deletes by
  // the rate limiter); returns how many. O(capacity) when any stored version is below bound,
  // else O(1).
  std::uint64_t drop_versions_below(std::uint64_t bound);
  const VersionIndex& versions() const { return versions_; }
  // Whether a sample may be bounded by version: failed_precondition for tables with
  // max_times_sampled (a bounded batch could retire every eligible item midway). O(1).
  Status check_min_version() const;

  // Removes every item and resets the rate limiter; counters and keys issued so far are kept
  // (keys stay unique). Counted in ReplayHistograms::resets / reset_items. O(capacity).
  void reset();

  // The service's monotonic time in milliseconds (never 0), stamped on items stored and used
  // to age items drawn from now on; core reads no clock. 0 (the default): ages in time are
  // not recorded. O(1).
  void set_now_ms(std::uint64_t now_ms) { now_ms_ = now_ms; }

  // The episodic part (core/table/episodic_table.h): episodes, windows, n-step and sequence
  // samples, whole-step reads. nullptr unless the table was created with episodes enabled.
  EpisodicTable* episodic() { return episodic_.get(); }
  const EpisodicTable* episodic() const { return episodic_.get(); }

  // The file tier (docs/FILE_TIER.md): nullptr unless config().file_tier is enabled.
  const TierIndex* tier() const { return tier_.get(); }
  // Per field, the bytes a cold row's record holds of it (file_tier_field_bytes; 0 for a
  // field that stays in RAM). Empty without a file tier.
  std::span<const std::uint64_t> tier_field_bytes() const { return tier_field_bytes_; }
  // Whether `slot` is cold: its written-out fields are in a segment, not in RAM. O(1).
  bool cold(std::uint32_t slot) const { return tier_ && tier_->cold(slot); }
  // Whether inserts wait for the file tier to write rows out (more than kFileTierSlackRows
  // rows past its RAM budget are hot). O(1).
  bool tier_behind() const;
  // Up to `most` of the oldest rows past the RAM budget, to write out: their cells stay valid
  // and unchanged until finish_spill or abandon_spill, unless the row is removed meanwhile
  // (its slot may then be written again: the writer's copy is discarded). O(most).
  std::vector<SpillRow> choose_spill(std::uint64_t most);
  // The rows chosen were written out at `where` (one per row): each whose slot still holds
  // its key goes cold, its stamp is cleared and the whole pages of its cells are given back
  // (a run of cold slots gives back the pages it spans with its cold neighbours). O(rows).
  void finish_spill(std::span<const SpillRow> rows, std::span<const ColdLocation> where);
  // The write failed: the rows stay hot and are chosen again first. O(rows).
  void abandon_spill(std::span<const SpillRow> rows);
  // Compaction (docs/FILE_TIER.md): up to `most_rows` rows and `most_bytes` of the records of
  // `segment`'s live rows, to copy elsewhere; then finish_moves with where each copy lies (a row
  // removed meanwhile stays removed: its copy is dead space), or abandon_moves. O(rows).
  std::vector<MoveRow> choose_moves(std::uint32_t segment, std::uint64_t most_rows,
                                    std::uint64_t most_bytes);
  void finish_moves(std::span<const MoveRow> rows, std::span<const ColdLocation> to);
  void abandon_moves(std::span<const MoveRow> rows);

  TableInfo info() const;
  // Bytes the table's storage and selectors hold; never more than table_bytes(config()). O(1).
  // A table with a file tier counts the cells of its hot rows only (those of cold rows were
  // given back), with an edge page per field of each run of them.
  std::uint64_t allocated_bytes() const {
    return storage_.allocated_bytes() - given_back_bytes() + sampler_->allocated_bytes() +
           remover_->allocated_bytes() +
           std::uint64_t{config_.capacity} * ReplayStats::kBytesPerSlot +
           versions_.eligible_bytes();
  }
  // The sampler's mass of the stored items (see SamplingMass). O(1).
  SamplingMass sampling_mass() const { return sampler_->mass(storage_.size()); }

  // Read access for snapshots and tests.
  const Storage& storage() const { return storage_; }
  const Rng& rng() const { return rng_; }
  const RateLimiter& rate_limiter() const { return rate_limiter_; }

 private:
  // The snapshot codec (core/snapshot/table_snapshot.cpp) saves and rebuilds the private state
  // below; nothing else reaches past the public interface.
  friend class TableSnapshotAccess;
  // The episodic part stores steps as the table's items and draws them with its selectors.
  friend class EpisodicTable;

  Table(TableConfig config, std::unique_ptr<ColumnMemory> memory, RateLimiter rate_limiter,
        std::unique_ptr<Selector> sampler, std::unique_ptr<Selector> remover);
  void remove_item(std::uint32_t slot);
  // Bytes of the column block a file tier does not hold: every column cell but those of
  // hot rows (and two pages per field), less its own per-slot state. 0 without one. O(fields).
  std::uint64_t given_back_bytes() const;
  // Records the draws of a batch in the replay statistics: `keys` were just drawn (their
  // slots still hold them, or were freed by max_times_sampled during the batch). A pass of
  // its own after the batch, with prefetch, so that its per-slot loads overlap. At most
  // kObservedDrawsPerRequest draws of a batch are recorded, evenly spaced. O(min(n, 16)).
  void observe_draws(std::span<const std::uint64_t> keys);
  // Copies (or views) the fields of the rows whose keys sample() just drew into `out`. A pass
  // of its own after the draws, fetching rows ahead so that their cache misses overlap. A row
  // that max_times_sampled retired during the draws still holds its bytes (release() keeps
  // the fixed-size columns, and item tables have no compressed field). The rows listed in
  // *out.cold from first_cold on (cold when drawn, in row order) are left to the caller,
  // but for their fields that stay in RAM.
  void gather_rows(const SampleBuffers& out, std::size_t first_cold) const;
  // Copies the fields of cold `slot` that a file tier leaves in RAM into row `row` of
  // `columns` (empty columns skipped). O(fields).
  void copy_kept_fields(std::uint32_t slot, std::uint64_t row,
                        std::span<const std::span<std::byte>> columns) const;
  // Copies hot `slot`'s fields into row `row` of `columns` (one span per field), or, for a
  // field whose column is empty and whose `rows` span is not, views it in place (row
  // pointer); other fields (compressed, frames) are skipped. O(fields).
  void copy_hot_row(std::uint32_t slot, std::uint64_t row,
                    std::span<const std::span<std::byte>> columns,
                    std::span<const std::span<const std::byte*>> rows = {}) const;
  // copy_hot_row, or, when the slot is cold, lists row `row` in *listed (required then) and
  // copies only its fields that stay in RAM. O(fields).
  void copy_or_list(std::uint32_t slot, std::uint64_t row,
                    std::span<const std::span<std::byte>> columns,
                    std::span<const std::span<const std::byte*>> rows,
                    std::vector<ColdDraw>* listed) const;
  static constexpr std::size_t kObservedDrawsPerRequest = 16;
  // Every how many draws of a batch of `draws` one is recorded (1 up to 16 draws).
  static std::size_t observed_stride(std::size_t draws) {
    return (draws + kObservedDrawsPerRequest - 1) / kObservedDrawsPerRequest;
  }
  std::uint64_t draws_left(std::uint32_t slot) const;
  // Checks n rows; for compressed fields also every frame (check_frames), and returns the
  // cost of the rows' compressed values (BlobColumn::cost, summed).
  Result<std::uint64_t> check_rows(
      std::span<const std::span<const std::byte>> columns, std::uint64_t n,
      std::span<const double> priorities, std::span<std::uint64_t> keys_out,
      std::span<const std::span<const std::uint32_t>> frame_sizes = {});
  // invalid_argument unless `versions` holds 0, 1 or n values (Table::insert).
  Status check_versions(std::span<const std::uint64_t> versions, std::uint64_t n) const;
  Result<std::uint64_t> check_frames(std::span<const std::span<const std::byte>> columns,
                                     std::uint64_t n,
                                     std::span<const std::span<const std::uint32_t>> frame_sizes);
  // Stores row i of `columns` (evicting first when full, or while the compressed values
  // would exceed their budget) and returns its slot. For compressed fields, row i's frame
  // is frame_sizes[f][i] bytes at frame_offsets[f] of columns[f]; the caller advances
  // frame_offsets past it.
  std::uint32_t store_row(std::span<const std::span<const std::byte>> columns, std::uint64_t i,
                          std::span<const double> priorities,
                          std::span<const std::span<const std::uint32_t>> frame_sizes = {},
                          std::span<std::uint64_t> frame_offsets = {},
                          std::span<const std::uint64_t> versions = {});
  // The selector a sample bounded by min_version draws with: the sampler when every stored
  // item is eligible, else the eligible sampler (built here when its bound differs).
  const Selector& sampler_for(std::uint64_t min_version);

  TableConfig config_;
  Storage storage_;
  RateLimiter rate_limiter_;
  std::unique_ptr<Selector> sampler_;
  std::unique_ptr<Selector> remover_;
  Rng rng_;
  TableCounters counters_;
  double max_priority_ = 1.0;
  // Sum over stored items of (max_times_sampled - times_sampled); only kept when
  // max_times_sampled > 0. A sample of n needs n draws left.
  std::uint64_t draws_left_ = 0;
  std::uint64_t blob_budget_ = 0;  // compressed_budget(config_)
  ReplayStats replay_;
  std::uint64_t now_ms_ = 0;  // set_now_ms
  VersionIndex versions_;
  std::optional<std::uint64_t> policy_version_;  // set_policy_version
  std::unique_ptr<EpisodicTable> episodic_;      // episodic tables only
  std::unique_ptr<TierIndex> tier_;              // tables with a file tier only
  std::vector<std::uint64_t> tier_field_bytes_;  // file_tier_field_bytes; empty without one
};

}  // namespace replayd
