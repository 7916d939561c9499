// The segment files of a file tier (docs/FILE_TIER.md): append-only files of row records,
// each [u32 payload bytes | raw << 31][u32 CRC-32C of the row's bytes][payload]. The payload
// is one zstd frame of the row's fixed-size fields concatenated in schema order, or, when
// compression would save less than an eighth (raw), those bytes themselves: a raw record is
// read straight into its destinations (preadv), with no copy between. These functions block
// on the disk: call them on the IoPool only.
// Ownership: a SegmentFile owns its descriptor; jobs hold it by shared_ptr, so a segment
// deleted (unlinked) while a read is in flight stays readable by that read. Its last
// reference is dropped on the pool (closing may wait for writeback).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tier/tier_index.h"

namespace replayd::service {

struct SegmentFile {
  SegmentFile(std::uint32_t id, int fd, std::string path) : id(id), fd(fd), path(std::move(path)) {}
  ~SegmentFile();
  SegmentFile(const SegmentFile&) = delete;
  SegmentFile& operator=(const SegmentFile&) = delete;
  std::uint32_t id;
  int fd;
  std::string path;
};

// Bytes of a record's header.
inline constexpr std::uint64_t kRecordHeaderBytes = 8;

// Creates segment `id` in `dir` (segment-<id>); an error names the file and the reason.
Result<std::shared_ptr<SegmentFile>> create_segment(const std::string& dir, std::uint32_t id);

// Opens segment `id` at `path` to read it (a restored table's, written by an earlier run);
// `bytes` receives its size. An error names the file and the reason.
Result<std::shared_ptr<SegmentFile>> open_segment(const std::string& path, std::uint32_t id,
                                                  std::uint64_t& bytes);

// Compresses each row and appends the records to `segment` at `offset`, in one write. Row
// i's field f is field_bytes[f] bytes at cells[i * fields + f]. Returns each record's
// location (segment.id, offset, bytes, raw).
Result<std::vector<ColdLocation>> append_rows(const SegmentFile& segment, std::uint64_t offset,
                                              std::span<const std::byte* const> cells,
                                              std::span<const std::uint64_t> field_bytes);

// Copies whole records of `source` (`from`, ascending offsets) to `target` at `offset`, end
// to end in one write, checking each record's length word against its location (a record
// is self-contained: its CRC covers the row, not where it lies). Returns where each copy
// lies, in the order of `from`. Compaction's copy.
Result<std::vector<ColdLocation>> copy_records(const SegmentFile& source,
                                               std::span<const ColdLocation> from,
                                               const SegmentFile& target, std::uint64_t offset);

// One cold row to read: its record, and where each of its fields goes (field_bytes[f]
// bytes at into[f]; a field of 0 bytes is not in the record). `scratch` holds the fields a
// read does not need (an n-step draw's bootstrap step needs only the bootstrap fields): each
// read its own, since every record's CRC is checked over its fields once all are in place.
struct ColdRead {
  std::shared_ptr<SegmentFile> segment;
  ColdLocation where;
  std::vector<std::byte*> into;
  std::vector<std::byte> scratch;
};
// Reads the records (sorted by segment and offset; adjacent records in one read, raw ones
// straight into their destinations), checks each CRC and puts each row's fields in place.
// An error names the segment.
Status read_rows(std::vector<ColdRead>& reads, std::span<const std::uint64_t> field_bytes);

}  // namespace replayd::service
