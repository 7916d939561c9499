// Table snapshots: encodes tables into one snapshot image and decodes it back, through the
// narrow SnapshotSink / SnapshotSource interface (core/snapshot/snapshot_io.h); the layout is in
// docs/SNAPSHOT.md. A decoded table behaves exactly as the original would have: same items
// in the same slots with the same keys, same selector orders, key generations, counters,
// rate-limiter counters, largest priority and RNG state.
// Decoding trusts nothing: every length is checked against its limit before allocating,
// every section's checksum before its bytes are used, every value against the invariants
// of the table. Any failure rejects the whole image with a reason; nothing is half-restored.
// Threading: pure functions; the caller must not mutate a table while it is being written.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/result.h"
#include "core/snapshot/snapshot_io.h"
#include "core/snapshot/snapshot_sections.h"
#include "core/snapshot/value_snapshot.h"
#include "core/table/table.h"

namespace replayd {

inline constexpr char kSnapshotMagic[8] = {'R', 'P', 'L', 'Y', 'S', 'N', 'A', 'P'};
// Version 2 adds, after each table's other sections, the keys of items whose bytes changed
// while the image was written (a forked writer reading columns the server keeps writing, in
// shared memory): they are dropped when the image is read. Version 1 images still load.
// Version 3 adds, after those, each table's metadata (TableConfig::metadata).
// Version 4 adds published values after the tables (core/snapshot/value_snapshot.h), their
// count in FINF's and FEND's second field (0 before).
// Version 5 adds, after each table's metadata, its policy versions (TVRH, TVRS): the
// followed value and drop_behind, and every stored item's version (docs/VERSIONS.md).
// Version 6 adds, after each table's configuration, its file tier (TTRH, TTRC): the RAM
// budget and where each cold row lies; a cold row's cells are left out of TITM, its bytes
// stay in the segment files kept beside the image (docs/FILE_TIER.md).
inline constexpr std::uint32_t kSnapshotVersion = 6;
inline constexpr std::uint32_t kOldestSnapshotVersion = 1;
inline constexpr std::uint32_t kSnapshotHeaderBytes = 16;  // magic, version, header crc32c

struct SnapshotStats {
  std::uint32_t tables = 0;
  std::uint64_t items = 0;          // items the image restores (written, less those dropped)
  std::uint64_t items_dropped = 0;  // items overwritten while the image was written: listed
                                    // as lost, so a restore leaves them out
  std::uint64_t bytes = 0;          // bytes of the whole image
};

// Writes the file header, every table, every published value, and the end section, in that
// order. On success
// returns what was written; on a sink error, returns it (the image is then incomplete: no
// end section). Cost: O(total capacity + stored bytes); memory: one 1 MiB section buffer.
Result<SnapshotStats> write_snapshot(std::span<const Table* const> tables,
                                     std::uint64_t created_unix_ms, SnapshotSink& sink,
                                     std::span<const SnapshotValueOut> values = {});

struct SnapshotLimits {
  std::uint32_t max_tables = 256;                           // tables in one image
  std::uint64_t max_table_bytes = std::uint64_t{64} << 30;  // capacity x item bytes
  // Where decoded tables get their column blocks (not owned); null: private memory.
  ColumnMemorySource* column_memory = nullptr;
  std::uint32_t max_values = 256;                          // published values in one image
  std::uint64_t max_value_bytes = std::uint64_t{2} << 30;  // bytes of one value
};

struct DecodedSnapshot {
  std::uint64_t created_unix_ms = 0;
  std::vector<std::unique_ptr<Table>> tables;  // in the order they were written
  std::vector<SnapshotValueIn> values;         // published values (version 4 images)
  SnapshotStats stats;
};

// Reads a whole image written by write_snapshot. Errors (invalid_argument for bad data, or
// the source's own error) name the table, the section, its byte offset and the reason:
// truncated, bad magic, unknown version, checksum mismatch, a length over its limit, a
// value that breaks an invariant. Memory: the tables themselves plus one section buffer.
Result<DecodedSnapshot> read_snapshot(SnapshotSource& source, const SnapshotLimits& limits);

// One table's sections (also used by tests to corrupt a single table). Writing: an item
// whose slot's stamp no longer holds its key once its bytes are copied (the server
// overwrote it after a fork) is written, and listed as lost. Reading: `version` is the
// image's; lost items are removed from the table read (counted as evictions), and
// `items_written` (if not null) receives how many items the image held for it, lost ones
// included. `items_lost` (if not null) receives how many items were written as lost.
Status write_table_sections(const Table& table, SectionWriter& writer,
                            std::uint64_t* items_lost = nullptr);
Result<std::unique_ptr<Table>> read_table_sections(SectionReader& reader,
                                                   std::uint64_t max_table_bytes,
                                                   std::uint32_t version = kSnapshotVersion,
                                                   ColumnMemorySource* column_memory = nullptr,
                                                   std::uint64_t* items_written = nullptr);

}  // namespace replayd
