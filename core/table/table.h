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
#include <span>
#include <vector>

#include "core/episodes/complete_episodes.h"
#include "core/episodes/episode_index.h"
#include "core/table/rate_limiter.h"
#include "core/result.h"
#include "core/rng.h"
#include "core/selectors/selector.h"
#include "core/episodes/step_log.h"
#include "core/storage/storage.h"
#include "core/table/table_config.h"
#include "core/episodes/window_index.h"

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
  bool operator==(const TableCounters&) const = default;
};

struct TableInfo {
  std::uint64_t size = 0;
  std::uint64_t capacity = 0;
  TableCounters counters;
  RateLimiterCounters rate_limiter;
  double max_priority = 1.0;
  // Episodic tables without history padding: stored steps that only hold the history of
  // later ones (the first max_stack - 1 of their episode), never drawn.
  std::uint64_t history_steps = 0;
};

// Caller-owned destination for a sample of n items. Every span holds exactly n values;
// columns holds one span per schema field, in schema order, of n * item_bytes bytes.
// The spans are only borrowed for the duration of sample().
// A field may instead be viewed in place: its column left empty and rows[field] holding n
// pointers, which sample() sets to the stored values of the draws. Such a pointer stays
// valid, and its bytes unchanged, only until the table's next insert, delete, reset or
// restore (or its destruction): a caller must copy or send them before then.
struct SampleBuffers {
  std::span<std::uint64_t> keys;
  std::span<double> probabilities;
  std::span<double> weights;
  std::span<std::uint32_t> times_sampled;  // count after this sample, so >= 1
  std::span<const std::span<std::byte>> columns;
  std::span<const std::span<const std::byte*>> rows = {};  // per field, where columns[f] is empty
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

// n-step sample options. k: 1 .. capacity; gamma: [0, 1]; beta: finite, >= 0.
struct NStepRequest {
  std::uint32_t k = 1;
  double gamma = 1.0;
  double beta = 0.0;
};

// Caller-owned destination of an n-step sample of n draws. `base` as for sample(), except
// that every column must be copied (no viewed rows); it receives step t's own fields.
// returns: n values in the reward field's dtype (sum_{i<h} gamma^i r_{t+i}, accumulated in
// double). bootstrap: one span per config.episodes.bootstrap_fields entry, n * item_bytes,
// the field's value at step t+h-1. discounts: gamma^h, or 0 when the episode terminated at
// step t+h-1. steps: h = min(k, steps left in the episode).
// Tables with next_of fields: the window walks to step t+h, the next observation, so h =
// min(k, steps left before the episode's final observation).
// Frame fields (Field::is_frame) are not copied: their base column is empty and frames[f]
// receives, per draw, the slots whose values make its frames (appended; see frame_layout()).
// frames holds one vector per field (others untouched), or is empty when the schema has no
// frame field.
struct NStepBuffers {
  SampleBuffers base;
  std::span<std::byte> returns;
  std::span<const std::span<std::byte>> bootstrap;
  std::span<double> discounts;
  std::span<std::uint32_t> steps;
  std::span<std::vector<std::uint32_t>> frames = {};
};

// A frame that is all zeros (padding past an episode's end) in SequenceBuffers::frames.
inline constexpr std::uint32_t kNoFrame = UINT32_MAX;

// The frames an n-step draw of h steps sends for a field with `stack` s and `next_of`:
// `count` frames, of which frames [0, s) make the stacked value of step t (steps t-s+1 .. t,
// the episode's first step repeated before its start) and, with next_of, frames
// [next_offset, next_offset + s) the stacked value of step t+h. Unique frames only: when
// the two stacks overlap (h < s) they share frames.
struct FrameLayout {
  std::uint32_t count = 1;
  std::uint32_t next_offset = 0;
};
inline FrameLayout frame_layout(std::uint32_t stack, bool next_of, std::uint32_t h) {
  if (!next_of) return FrameLayout{stack, 0};
  const std::uint32_t shift = h < stack ? h : stack;
  return FrameLayout{stack + shift, shift};
}

// The valid starts of an n-step or sequence request's windows and their sampling mass.
struct WindowState {
  std::uint32_t starts = 0;
  SamplingMass mass;
};

// Sequence sample options. A sequence is burn_in + length consecutive steps of one
// episode; its start (the step whose key, priority and times-sampled count the draw uses)
// is the first of the `length` steps. stride: starts are positions that are multiples of
// it (1 = any step; length - overlap for R2D2). burn_in: steps before the start, masked out
// where they would precede the episode. pad: an ended episode may end the sequence early
// (the rest masked out and zero-filled); without pad only full windows are drawn.
// length >= 1, burn_in + length <= capacity, stride >= 1, beta finite >= 0.
struct SequenceRequest {
  std::uint32_t length = 1;
  std::uint32_t stride = 1;
  std::uint32_t burn_in = 0;
  bool pad = false;
  double beta = 0.0;
};

// Caller-owned destination of n sequences of T = burn_in + length steps each.
// keys .. times_sampled: n values (of the start steps). columns: per field, n * T *
// item_bytes, C order (n, T, ...). mask: n * T, 1 for a real step, 0 for padding.
// Frame fields: as for NStepBuffers, per sequence T + stack - 1 frames, of steps
// start - burn_in - stack + 1 .. start + length - 1 (the episode's first step repeated
// before its start, kNoFrame past its end); the stacked value of row j is frames j .. j+s-1.
// In a table with next_of fields, an ended episode's last step (its final observation) is
// masked 0 but its frames are sent.
struct SequenceBuffers {
  std::span<std::uint64_t> keys;
  std::span<double> probabilities;
  std::span<double> weights;
  std::span<std::uint32_t> times_sampled;
  std::span<const std::span<std::byte>> columns;
  std::span<std::uint8_t> mask;
  std::span<std::vector<std::uint32_t>> frames = {};
};

// Caller-owned destination of whole steps (whole-episode reads, reading everything). Every
// span holds the same number of rows, except columns: one span per field, rows x item_bytes.
// sequences: each step's insertion sequence number (the cursor of read_steps).
// Compressed fields are not copied (their column is empty); slots receives each row's slot,
// whose values the caller reads from storage().blobs(f).
struct StepBuffers {
  std::span<std::uint64_t> keys;
  std::span<std::uint64_t> episodes;
  std::span<std::uint32_t> positions;
  std::span<std::uint64_t> sequences;
  std::span<const std::span<std::byte>> columns;
  std::span<std::uint32_t> slots = {};  // required when the schema has a compressed field
};

class Table {
 public:
  // Validates `config` (see validate_table_config, selector and rate limiter rules) and
  // allocates storage for `capacity` items.
  static Result<std::unique_ptr<Table>> create(
      TableConfig config, std::uint64_t max_table_bytes = kDefaultMaxTableBytes);
  static constexpr std::uint64_t kDefaultMaxTableBytes = std::uint64_t{64} << 30;

  const TableConfig& config() const { return config_; }
  const std::string& name() const { return config_.name; }
  const Schema& schema() const { return config_.schema; }
  std::uint32_t size() const { return storage_.size(); }

  // Whether the rate limiter and the stored items admit an insert / a sample of n now.
  bool may_insert(std::uint64_t n) const;
  bool may_sample(std::uint64_t n) const;

  // Stores n items. columns: one span per field in schema order, each n * item_bytes bytes,
  // C order. priorities: empty (every item gets the largest priority seen so far) or n
  // finite values >= 0. keys_out: n slots that receive the new keys in order.
  // When full, the remover evicts one item per new item. n must not exceed capacity.
  // Errors: invalid_argument (shape of input, bad priority, n out of range, a batch the
  // rate limiter could never admit), would_block. Cost: O(n * (item bytes + log capacity)).
  Status insert(std::span<const std::span<const std::byte>> columns, std::uint64_t n,
                std::span<const double> priorities, std::span<std::uint64_t> keys_out);

  // Draws n items one after another (with replacement unless max_times_sampled removes an
  // item mid-batch) and copies each row straight into `out`. beta: importance-sampling
  // exponent, finite, >= 0. Errors: invalid_argument, would_block.
  // Cost: O(n * (item bytes + log capacity)), no allocation.
  Status sample(std::uint64_t n, double beta, const SampleBuffers& out);

  // Sets priorities (finite, >= 0) of the items whose keys are still stored; stale keys are
  // counted and ignored. All priorities are validated first: one bad value rejects the call.
  Result<UpdateOutcome> update_priorities(std::span<const std::uint64_t> keys,
                                          std::span<const double> priorities);

  // Removes the items whose keys are still stored; stale keys are counted and ignored.
  DeleteOutcome delete_keys(std::span<const std::uint64_t> keys);

  // Removes every item and resets the rate limiter; counters and keys issued so far are kept
  // (keys stay unique). O(capacity).
  void reset();

  // ---- Episodic tables (each call fails with failed_precondition on other tables) ----

  bool episodic() const { return episodes_ != nullptr; }
  static constexpr std::size_t kMaxOpenEpisodes = std::size_t{1} << 16;

  // Opens a new empty episode for `writer` (any id the caller uses for one writer, such as
  // a connection) and returns its id (ids are never reused). Errors: resource_exhausted
  // past kMaxOpenEpisodes open episodes. O(1).
  Result<std::uint64_t> open_episode(std::uint64_t writer);
  // Stores n steps; step i goes to episode episodes[i] (open, of this writer), after the
  // steps already appended to it (rows of one episode in order). Other arguments, errors
  // and costs as insert(); also invalid_argument when an episode is not open for `writer`.
  // Costs O(forward + backward) more per step and window index.
  // Compressed fields: columns[f] holds the n values' zstd frames back to back and
  // frame_sizes[f] their n sizes (frame_sizes holds one span per field, empty for the
  // others; it may be empty when no field is compressed). Each frame is checked
  // (check_zstd_frame) before anything is stored; when the compressed values would exceed
  // compressed_budget(), the remover evicts steps first, as when the table is full.
  Status append_steps(std::uint64_t writer, std::span<const std::uint64_t> episodes,
                      std::span<const std::span<const std::byte>> columns, std::uint64_t n,
                      std::span<const double> priorities, std::span<std::uint64_t> keys_out,
                      std::span<const std::span<const std::uint32_t>> frame_sizes = {});
  // Ends the open episode `episode` of `writer`. Errors: invalid_argument when it is not
  // open for this writer or has no steps. O(forward^2) per window index at most.
  // Tables with next_of fields: `final_values` (one span per field: the value of each next_of
  // field, one zstd frame when compressed; empty for the others) is the observation after the
  // last step, stored as one more step of the episode whose other fields are zero. Without
  // it (empty span), the last step appended serves as the final observation and is no
  // transition of its own. Other tables: final_values must be empty.
  Status end_episode(std::uint64_t writer, std::uint64_t episode, EpisodeEnd how,
                     std::span<const std::span<const std::byte>> final_values = {});
  // A writer left: its open episodes with steps end as truncated (their steps stay), its
  // empty ones are forgotten. Returns how many episodes were ended. O(episodes).
  std::uint64_t end_writer(std::uint64_t writer);
  // end_writer for every writer with an open episode: for a restored table, whose writers'
  // connections are gone. Returns how many episodes were ended. O(episodes).
  std::uint64_t end_all_writers();

  // Draws n start steps (with replacement, unless max_times_sampled retires a start
  // mid-batch) among the valid starts of an n-step window and fills `out`. Errors:
  // invalid_argument (request or buffers), resource_exhausted (too many distinct window
  // requirements), would_block (rate limiter, or too few valid starts / draws left).
  // Cost: O(n * (k + item bytes + log capacity)); the first call with a new k scans the
  // table once, O(capacity * k).
  Status sample_nstep(std::uint64_t n, const NStepRequest& request, const NStepBuffers& out);
  // Draws n sequences; as sample_nstep. Cost O(n * T * item bytes + n log capacity).
  Status sample_sequences(std::uint64_t n, const SequenceRequest& request,
                          const SequenceBuffers& out);
  // Whether a sample of n of this kind would be admitted now. Builds the window index on
  // first use (hence not const); false for a malformed request.
  bool may_sample_nstep(std::uint64_t n, const NStepRequest& request);
  bool may_sample_sequences(std::uint64_t n, const SequenceRequest& request);
  // The number of valid starts for an n-step request / a sequence request (tests, info).
  Result<std::uint32_t> nstep_starts(const NStepRequest& request);
  Result<std::uint32_t> sequence_starts(const SequenceRequest& request);
  // The same with their mass, as a draw of this request sees it (sample replies report it;
  // a client sampling several shards combines them with it). Builds the index on first use.
  Result<WindowState> nstep_state(const NStepRequest& request);
  Result<WindowState> sequence_state(const SequenceRequest& request);

  // Draws n complete episodes (ended, every step still stored) uniformly, with replacement:
  // ids_out and probabilities_out (1 / complete episodes) hold n values. Counted by the rate
  // limiter as n samples; times sampled of steps unchanged. Errors: invalid_argument,
  // would_block (no complete episode, rate limiter). O(n log capacity).
  Status sample_episodes(std::uint64_t n, std::span<std::uint64_t> ids_out,
                         std::span<double> probabilities_out);
  // The number of stored steps of the episodes `ids` together (to size read_episodes'
  // buffers). Errors: not_found for an id that is not live. O(ids).
  Result<std::uint64_t> episode_steps(std::span<const std::uint64_t> ids) const;
  // Copies the stored steps of each episode in `ids`, in position order, concatenated into
  // `out` (exactly episode_steps(ids) rows); offsets (ids.size() + 1 values) receive where
  // each episode's rows begin, and the total last. Positions show holes left by deletes.
  // Errors: not_found, invalid_argument (buffer sizes). O(rows x item bytes).
  Status read_episodes(std::span<const std::uint64_t> ids, const StepBuffers& out,
                       std::span<std::uint64_t> offsets) const;
  // Reading everything: copies up to out.keys.size() stored steps whose insertion sequence
  // is > after, oldest first, and returns how many. Start with after = 0 and pass the last
  // sequence returned to get the next page; 0 rows means the end. Steps stored meanwhile
  // appear in later pages; steps removed meanwhile are skipped. Not rate limited.
  // O(log capacity + rows x item bytes).
  Result<std::uint64_t> read_steps(std::uint64_t after, const StepBuffers& out) const;

  // Episode bookkeeping, read-only; nullptr unless episodic.
  const EpisodeIndex* episodes() const { return episodes_.get(); }

  TableInfo info() const;
  // Bytes the table's storage and selectors hold; never more than table_bytes(config()). O(1).
  std::uint64_t allocated_bytes() const {
    return storage_.allocated_bytes() + sampler_->allocated_bytes() + remover_->allocated_bytes();
  }
  // The sampler's mass of the stored items (see SamplingMass). O(1).
  SamplingMass sampling_mass() const { return sampler_->mass(storage_.size()); }

  // Read access for snapshots and tests.
  const Storage& storage() const { return storage_; }
  const Rng& rng() const { return rng_; }
  const RateLimiter& rate_limiter() const { return rate_limiter_; }

 private:
  // The snapshot codec (core/snapshot/table_snapshot.cpp) saves and rebuilds the private state below;
  // nothing else reaches past the public interface.
  friend class TableSnapshotAccess;

  Table(TableConfig config, RateLimiter rate_limiter, std::unique_ptr<Selector> sampler,
        std::unique_ptr<Selector> remover);
  void remove_item(std::uint32_t slot);
  std::uint64_t draws_left(std::uint32_t slot) const;
  // Checks n rows; for compressed fields also every frame (check_frames), and returns the
  // cost of the rows' compressed values (BlobColumn::cost, summed).
  Result<std::uint64_t> check_rows(
      std::span<const std::span<const std::byte>> columns, std::uint64_t n,
      std::span<const double> priorities, std::span<std::uint64_t> keys_out,
      std::span<const std::span<const std::uint32_t>> frame_sizes = {});
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
                          std::span<std::uint64_t> frame_offsets = {});
  // Appends the final-observation step of a next_of table's open episode.
  Status append_final_values(std::uint64_t episode,
                             std::span<const std::span<const std::byte>> final_values);
  // Appends the frame slots of an n-step draw / a sequence to out[f] for each frame field.
  void add_nstep_frames(const Episode& episode, std::uint32_t position, std::uint32_t h,
                        std::span<std::vector<std::uint32_t>> out) const;
  void add_sequence_frames(const Episode& episode, std::int64_t first, std::uint64_t steps,
                           std::span<std::vector<std::uint32_t>> out) const;
  Status require_episodic(const char* operation) const;
  Result<WindowIndex*> window_index(const WindowSpec& spec);
  Result<WindowSpec> nstep_spec(const NStepRequest& request) const;
  Result<WindowSpec> sequence_spec(const SequenceRequest& request) const;
  Status admit_windows(std::uint64_t n, const WindowIndex& index);
  // Counts a draw of start `slot`: times sampled, retirement by max_times_sampled.
  std::uint32_t record_draw(std::uint32_t slot);
  Status check_step_buffers(const StepBuffers& out, std::uint64_t rows) const;
  void copy_step(std::uint32_t slot, std::uint64_t row, const StepBuffers& out) const;

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
  // Episodic tables only (else null): the episodes and the window indexes over them.
  std::unique_ptr<EpisodeIndex> episodes_;
  std::unique_ptr<WindowIndexSet> windows_;
  std::unique_ptr<CompleteEpisodes> complete_;
  std::unique_ptr<StepLog> step_log_;
  std::uint64_t blob_budget_ = 0;  // compressed_budget(config_)
  int reward_field_ = -1;
  std::vector<int> bootstrap_fields_;
};

}  // namespace replayd
