// TableConfig: everything that defines a table, as given in the config file or by a
// client's create_table. Plain data; validate_table_config() checks it as a whole.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/rng.h"
#include "core/schema.h"
#include "core/selectors/selector.h"
#include "core/table/rate_limiter.h"

namespace replayd {

// An episodic table stores steps of episodes (docs/TRAJECTORIES.md). Off by default.
struct EpisodeConfig {
  bool enabled = false;
  std::string reward_field = "rew";  // scalar float32 or float64; summed by n-step samples
  // Fields whose value at the last step of an n-step window is returned as the bootstrap
  // (the observation h steps later). Each must exist in the schema. Default: next_obs.
  std::vector<std::string> bootstrap_fields = {"next_obs"};
  // Whether a window may look back before its episode's first step (docs/PIXELS.md,
  // "Episodes that begin with history"). true: stacks repeat the first step's value and
  // burn-in reaches before the start. false: a start needs every step its window looks back
  // on (stack history, burn_in) stored in its own episode, so the first max_stack - 1 steps
  // of an episode are never drawn: a writer stores an episode's first frames there.
  bool pad_history = true;
  bool operator==(const EpisodeConfig&) const = default;
};

// Policy versions (docs/VERSIONS.md): every item carries the version of the policy that
// acted it (Storage::version, 0 when none was given). A table may follow a published value:
// its version is the table's current policy version, against which staleness is measured,
// and, with drop_behind k, publishing version V of it drops every item of version < V - k.
struct VersionsConfig {
  std::string value;                         // the followed value's name; empty: none
  std::optional<std::uint64_t> drop_behind;  // needs `value`
  bool operator==(const VersionsConfig&) const = default;
};

// Bytes of episode bookkeeping per slot of an episodic table (slot's episode id and
// position, the link to its episode's next step, the episode's slot list, the insertion
// log), counted against max_table_bytes.
inline constexpr std::uint64_t kEpisodeBytesPerSlot = 52;
// Bytes of one episode's record (its entry in the episode map and its slot queue's block;
// 105 measured for an episode of one step). Counted once per slot (every stored step may be
// an episode of its own) and once per open episode a table allows (empty ones included).
inline constexpr std::uint64_t kEpisodeMemoryBytes = 160;
// Open episodes of one table, at most (writers end episodes to open more).
inline constexpr std::uint64_t kMaxOpenEpisodesPerTable = std::uint64_t{1} << 16;
// Window indexes an episodic table may build (distinct window requirements).
inline constexpr std::uint64_t kMaxWindowIndexes = 8;

// A file tier (docs/FILE_TIER.md): the fixed-size fields of at most ram_bytes of rows stay in
// RAM; older rows are written out to segment files in the server's tier directory and
// read back when drawn. Plain (not episodic) tables only. 0: every row in RAM (the default).
struct FileTierConfig {
  std::uint64_t ram_bytes = 0;
  bool enabled() const { return ram_bytes != 0; }
  bool operator==(const FileTierConfig&) const = default;
};

// Rows past a file tier's RAM budget that may be hot while they are being written out (two
// of the writer's batches); inserts wait beyond them (an insert admitted just below adds
// its rows: RAM holds at most the budget, these rows and one insert request).
inline constexpr std::uint64_t kFileTierSlackRows = 128;
// Bytes a table with a file tier keeps per slot for it: its state and cold location (17),
// and its entries in the segments' slot lists (compaction; up to two of 4 bytes).
inline constexpr std::uint64_t kFileTierBytesPerSlot = 25;

struct TableConfig {
  std::string name;                           // 1..64 characters of [A-Za-z0-9_.-]
  Schema schema;                              // fields of every item
  std::uint32_t capacity = 0;                 // items, 1 .. 2^31
  SelectorConfig sampler;                     // default uniform
  SelectorKind remover = SelectorKind::fifo;  // eviction when full: any selector kind; a
                                              // prioritized remover uses priority_exponent 1
  std::uint32_t max_times_sampled = 0;        // remove an item after k samples; 0 = never
  RateLimiterConfig rate_limiter;             // default: min_size 1, no ratio
  std::uint64_t seed = 0;                     // RNG seed for sampling and uniform eviction
  EpisodeConfig episodes;                     // default: not episodic
  // Bytes the values of compressed fields may take together (BlobColumn::cost each); past
  // it, appends evict steps as a full table does. 0: as much as a full table of the largest
  // frames accepted (max_zstd_frame_bytes) takes, so that only the capacity evicts; set it
  // to the expected compressed size to reserve less of max_table_bytes.
  std::uint64_t max_compressed_bytes = 0;
  // The client's own description of the table (a dataset's spaces, say): JSON text the
  // table keeps, returns and snapshots unchanged and never reads. Empty: none.
  std::string metadata;
  VersionsConfig versions;
  FileTierConfig file_tier;
};

// Bytes of one row's fixed-size (uncompressed) fields: what a hot row holds in RAM.
std::uint64_t fixed_row_bytes(const Schema& schema);
// The bytes of each field that a file tier writes out per row, 0 for a field it leaves in
// RAM: compressed fields (their values are not in the column block), frame fields (a
// draw's frames are assembled from many steps while the reply is built) and an episodic
// table's reward field (an n-step draw sums the rewards of its window while drawing). A cold
// row's record holds its fields of nonzero bytes, in schema order.
std::vector<std::uint64_t> file_tier_field_bytes(const TableConfig& config);
// Their sum: the bytes of a cold row's record before compression.
std::uint64_t file_tier_row_bytes(const TableConfig& config);
// How many rows a file tier keeps hot: ram_bytes / fixed_row_bytes, at least 1.
std::uint64_t file_tier_ram_rows(const TableConfig& config);

// The longest metadata a table keeps, in bytes of JSON text.
inline constexpr std::uint64_t kMaxTableMetadataBytes = std::uint64_t{1} << 20;

// The budget of a table's compressed values (max_compressed_bytes, or its default).
std::uint64_t compressed_budget(const TableConfig& config);

// What a table of this configuration allocates when created, in bytes, split by component.
// Every part is derived from the structure that allocates it (Storage, selector_bytes), so
// the total is never less than Table::allocated_bytes(). Precondition: capacity >= 1.
struct TableBytes {
  uint128 data = 0;            // the column block (StorageLayout: a stamp per slot and
                               // capacity * item bytes per uncompressed field, each rounded up
                               // to a page) + compressed_budget() + the compressed fields'
                               // per-slot index
  std::uint64_t metadata = 0;  // capacity * Storage::kMetadataBytesPerSlot
  std::uint64_t sampler = 0;   // the sampler's trees and position maps
  std::uint64_t remover = 0;   // the remover's structures
  // Episodic tables: capacity * (kEpisodeBytesPerSlot + kEpisodeMemoryBytes), the records
  // of kMaxOpenEpisodesPerTable open episodes, the complete-episode set, and the
  // most window indexes a table may build (WindowIndexSet::kMaxIndexes, each a selector of
  // the sampler's kind and a membership byte per slot).
  std::uint64_t episodes = 0;
  std::uint64_t replay = 0;  // capacity * ReplayStats::kBytesPerSlot (store stamps per slot)
  // The sampler over the eligible items a sample bounded by version builds (VersionIndex): a
  // second selector of the sampler's kind, allocated when first needed.
  std::uint64_t versions = 0;
  uint128 total() const {
    return data + metadata + sampler + remover + episodes + replay + versions;
  }
};
TableBytes table_bytes(const TableConfig& config);

// Checks what no single component can: the name, the capacity against its bounds and
// against `max_table_bytes` (everything the table allocates: table_bytes().total()), a
// remover kind that can evict, and min_size_to_sample <= capacity; for an episodic table a
// uniform or prioritized sampler and reward / bootstrap fields that exist with the right
// shape; frame options (stack, next_of, compression) only in episodic tables. Errors name
// the key at fault; a table too large is resource_exhausted with its
// bytes per component.
Status validate_table_config(const TableConfig& config, std::uint64_t max_table_bytes);

// Whether a name is acceptable for a table (same rule as field names).
bool is_valid_table_name(std::string_view name);
// Whether a name is acceptable for a published value (kValueNameRule).
bool is_valid_value_name(std::string_view name);
// What a value name may be, as refusals of a bad one say it.
inline constexpr std::string_view kValueNameRule = "1 to 128 characters of A-Z a-z 0-9 _ . - /";
// "is not a value name (<kValueNameRule>)": the refusal's text after the offending name.
std::string not_a_value_name();

}  // namespace replayd
