// EpisodicTable: the episodic part of a table (docs/TRAJECTORIES.md), composed with its item
// table (core/table/table.h). The item table stores every step as an item, with its
// storage, selectors, rate limiter and counters; this part adds what makes them episodes:
// the episode index, the window indexes of n-step and sequence requests, complete episodes
// and the step log, and the operations over them (open, append, end; n-step and sequence
// draws; whole-step reads). A table created with episodes enabled owns one
// (Table::episodic()); a handler that needs one asks for it and gets nullptr from an item
// table.
// Lifetime: owned by its Table, which it references; never outlives it.
// Threading, blocking and failure atomicity: as Table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/episodes/complete_episodes.h"
#include "core/episodes/episode_index.h"
#include "core/episodes/step_log.h"
#include "core/episodes/window_index.h"
#include "core/table/table.h"

namespace replayd {

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
// A table with a file tier: base.cold is required (and no field viewed); a draw whose step t
// is cold is listed there (ColdTarget::columns, its row i), and one whose bootstrap step is
// cold too (ColdTarget::bootstrap): the caller reads their records into those rows.
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
// A table with a file tier: `cold` is required; each cold step of a sequence is listed
// there (row i * T + j) for the caller to read.
struct SequenceBuffers {
  std::span<std::uint64_t> keys;
  std::span<double> probabilities;
  std::span<double> weights;
  std::span<std::uint32_t> times_sampled;
  std::span<const std::span<std::byte>> columns;
  std::span<std::uint8_t> mask;
  std::span<std::vector<std::uint32_t>> frames = {};
  std::vector<ColdDraw>* cold = nullptr;
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
  // Optional (empty: not filled): how each step's episode ended at that step: 1 when it is
  // the last step of an episode ended terminated, 2 of one ended truncated, else 0.
  std::span<std::uint8_t> ends = {};
  // Optional (empty: not filled): each step's policy version (Storage::version).
  std::span<std::uint64_t> versions = {};
  // A table with a file tier: required; each cold step is listed (its row) for the caller
  // to read, its other columns filled.
  std::vector<ColdDraw>* cold = nullptr;
};

class EpisodicTable {
 public:
  // Builds the episodic state of `items`, whose config has episodes enabled.
  explicit EpisodicTable(Table& items);
  EpisodicTable(const EpisodicTable&) = delete;
  EpisodicTable& operator=(const EpisodicTable&) = delete;

  static constexpr std::size_t kMaxOpenEpisodes = kMaxOpenEpisodesPerTable;

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
                      std::span<const std::span<const std::uint32_t>> frame_sizes = {},
                      std::span<const std::uint64_t> versions = {});
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

  // Episode bookkeeping, read-only.
  const EpisodeIndex& episodes() const { return *episodes_; }
  // Steps stored before their episode's first transition (pad_history = false). O(1).
  std::uint64_t history_steps() const { return episodes_->history_steps(); }

  // ---- Hooks of the item table ----
  // Step `slot` is about to leave the table (eviction, delete). O(windows).
  void on_remove(std::uint32_t slot);
  // Step `slot`'s priority changed. O(windows x log capacity).
  void on_priority(std::uint32_t slot);
  // Every step was removed (Table::reset): episodes keep their ids, windows empty.
  void clear();
  // The sampler's exponent changed (Table::set_priority_exponent): windows are built again.
  void set_priority_exponent(double exponent) { windows_->set_priority_exponent(exponent); }

 private:
  // The snapshot codec saves and rebuilds the state below.
  friend class TableSnapshotAccess;

  const std::string& name() const;
  // Appends the final-observation step of a next_of table's open episode.
  Status append_final_values(std::uint64_t episode,
                             std::span<const std::span<const std::byte>> final_values);
  // Appends the frame slots of an n-step draw / a sequence to out[f] for each frame field.
  void add_nstep_frames(const Episode& episode, std::uint32_t position, std::uint32_t h,
                        std::span<std::vector<std::uint32_t>> out) const;
  void add_sequence_frames(const Episode& episode, std::int64_t first, std::uint64_t steps,
                           std::span<std::vector<std::uint32_t>> out) const;
  Result<WindowIndex*> window_index(const WindowSpec& spec);
  Result<WindowSpec> nstep_spec(const NStepRequest& request) const;
  Result<WindowSpec> sequence_spec(const SequenceRequest& request) const;
  Status admit_windows(std::uint64_t n, const WindowIndex& index);
  // Counts a draw of start `slot`: times sampled, retirement by max_times_sampled.
  std::uint32_t record_draw(std::uint32_t slot);
  // Records the draws of a batch (their start steps' keys) in the replay statistics. O(n).
  void observe_draws(std::span<const std::uint64_t> keys);
  Status check_step_buffers(const StepBuffers& out, std::uint64_t rows) const;
  // A table with a file tier copies every field it samples and needs a list of cold rows.
  Status check_cold_list(bool listed, bool viewed) const;
  void copy_step(std::uint32_t slot, std::uint64_t row, const StepBuffers& out) const;

  Table& items_;
  std::unique_ptr<EpisodeIndex> episodes_;
  std::unique_ptr<WindowIndexSet> windows_;
  std::unique_ptr<CompleteEpisodes> complete_;
  std::unique_ptr<StepLog> step_log_;
  int reward_field_ = -1;
  std::vector<int> bootstrap_fields_;
};

}  // namespace replayd
