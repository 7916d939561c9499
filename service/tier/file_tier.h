// FileTier: the disk side of one table's file tier (docs/FILE_TIER.md). The table's TierIndex
// says which rows are hot and cold; this writes the oldest hot rows past the RAM budget out
// to segment files, reads cold rows back for samples, compacts segments that a remover
// other than fifo left less than half live (their live records copied to the open segment),
// and deletes segments whose rows were all removed. Every disk access runs on the IoPool: the
// io_context thread only chooses, records and copies. Ownership: held by its HostedTable; the
// writer coroutine holds the HostedTable while a write is in flight (the job reads the table's
// cells). Threading: io_context thread only.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/table/table.h"
#include "metrics/log_throttle.h"
#include "service/snapshot/snapshot_gate.h"
#include "service/tier/io_pool.h"
#include "service/tier/segment_io.h"

namespace replayd::service {

struct HostedTable;

// Segments a restored table's tier starts with (their rows are the cold rows it restored).
struct AdoptedSegment {
  std::shared_ptr<SegmentFile> file;
  std::uint64_t bytes = 0;
};

// What a file tier did, for `info` and metrics.
struct FileTierStats {
  std::uint64_t rows_written = 0;   // rows written out
  std::uint64_t bytes_written = 0;  // their records' bytes
  std::uint64_t cold_reads = 0;     // cold rows read back for samples
  std::uint64_t read_batches = 0;   // samples that read cold rows
  double read_seconds = 0;          // those samples' time waiting on the reads
  std::uint64_t write_errors = 0;
  std::uint64_t segments_deleted = 0;
  std::uint64_t rows_moved = 0;   // live records copied out of half-live segments
  std::uint64_t bytes_moved = 0;  // their bytes
};

class FileTier {
 public:
  // `dir` exists (create_table made it); `executor`: the io_context's; a segment takes no
  // more rows once it holds `segment_bytes`. `adopted`: a restored table's segments, by id
  // (never written to again: new rows go to new segments). `gate` (null without snapshots):
  // while a snapshot is written, no segment file is deleted (its writer links the segments
  // its image refers to).
  FileTier(std::string dir, IoPool& pool, asio::any_io_executor executor,
           std::uint64_t segment_bytes, std::map<std::uint32_t, AdoptedSegment> adopted = {},
           std::shared_ptr<SnapshotGate> gate = nullptr);
  // Deletes the directory and its segments on the pool (once no snapshot is being written).
  ~FileTier();
  FileTier(const FileTier&) = delete;
  FileTier& operator=(const FileTier&) = delete;

  // Rows per write job.
  static constexpr std::uint64_t kWriteBatchRows = 64;
  // Records per compaction job, at most: a job's completion updates each row's location on
  // the io_context thread (about 0.1 us a row), so its turn stays short.
  static constexpr std::uint64_t kMoveBatchRows = 4096;
  static constexpr std::uint64_t kMoveBatchBytes = 8 << 20;

  // Called after anything that changed the table (table_changed): starts the writer when
  // more rows than the budget are hot, or a segment is due for compaction, and none is
  // running, and deletes segments whose rows were all removed. O(segments).
  void poke(HostedTable& hosted);
  // The reads of the rows of `cold` (the draws Table::sample or an episodic sample left
  // out) into `columns` (one span per field, of the sample's rows in the draws' numbering)
  // or, for ColdTarget::bootstrap, into `bootstrap` (one span per bootstrap field of the
  // table's episodes, n-step draws' rows): taken at once, holding their segments, so that
  // nothing deleted after the draws is missed. Call right after the sample, before anything
  // suspends. O(draws).
  std::vector<ColdRead> take_cold_reads(const Table& table, const std::vector<ColdDraw>& cold,
                                        std::span<const std::span<std::byte>> columns,
                                        std::span<const std::span<std::byte>> bootstrap = {}) const;
  // take_cold_reads and read_cold in one, for a request that draws from one table.
  asio::awaitable<Status> read_cold_into(const Table& table, const std::vector<ColdDraw>& cold,
                                         std::span<const std::span<std::byte>> columns,
                                         std::span<const std::span<std::byte>> bootstrap = {});
  // Reads them on the pool straight into their columns: suspends until the pool is done;
  // other requests are served meanwhile, and nothing else touches the columns. An error (a
  // damaged or missing record) names the segment.
  asio::awaitable<Status> read_cold(const Table& table, std::vector<ColdRead> reads);

  const std::string& dir() const { return dir_; }
  // The segment files (every one that may hold a live row), by id.
  std::vector<std::pair<std::uint32_t, std::string>> segment_paths() const;
  const FileTierStats& stats() const { return stats_; }
  std::uint64_t file_bytes() const;  // bytes of the live segment files
  std::size_t segments() const { return segments_.size(); }

 private:
  // Where the next records go: the end of the open segment, or a new segment (`segment`
  // null: none is open, or the open one is full).
  struct WriteTarget {
    std::uint32_t id = 0;
    std::shared_ptr<SegmentFile> segment;
    std::uint64_t offset = 0;
  };
  WriteTarget write_target() const;
  // A job appended `bytes` at `target` (`created`: the segment it made, if it made one).
  void record_write(const WriteTarget& target, std::shared_ptr<SegmentFile> created,
                    std::uint64_t bytes);
  // Appends records to a segment (on the pool): its file and the offset they start at.
  using RecordWrite =
      std::function<Result<std::vector<ColdLocation>>(const SegmentFile&, std::uint64_t)>;
  // Runs `write` on the pool at write_target() (creating the segment when it is new) and
  // records it: the bytes written, or a write error counted. Returns where the records lie.
  asio::awaitable<Result<std::vector<ColdLocation>>> write_records(RecordWrite write);
  // Waits kRetryAfterError after a failed write or copy.
  asio::awaitable<void> pause_after_error();
  // The writer: rows past the budget written out, then half-live segments compacted.
  asio::awaitable<void> write_out(std::shared_ptr<HostedTable> hosted);
  // One compaction job: up to kMoveBatchRows live records of the emptiest half-live segment
  // copied to the open segment. False when no segment is due (or the copy failed).
  asio::awaitable<bool> move_some(HostedTable& hosted);
  // The segment to compact: not the open one, its live records less than half its bytes,
  // the smallest share first. None when the remover is fifo (segments empty in the order
  // written, so a half-live one is being evicted) or a snapshot is being written (its
  // image names where the rows lie now). O(segments).
  std::optional<std::uint32_t> compaction_victim(const Table& table) const;
  void delete_dead_segments(const Table& table);

  std::string dir_;
  IoPool& pool_;
  asio::any_io_executor executor_;
  std::uint64_t segment_bytes_limit_;
  std::map<std::uint32_t, std::shared_ptr<SegmentFile>> segments_;
  std::map<std::uint32_t, std::uint64_t> segment_bytes_;
  std::uint32_t open_segment_ = 0;  // the segment written to; none before the first write
  bool has_open_segment_ = false;
  std::uint32_t next_segment_ = 0;  // the id the next segment gets
  std::shared_ptr<SnapshotGate> gate_;
  std::uint64_t open_bytes_ = 0;  // bytes of the open segment
  bool writing_ = false;          // the writer coroutine runs
  // Segments are looked for to delete when the table's TierIndex::segments_emptied() moved
  // past this, or a rescan is due (a segment stopped being the open one, segments adopted, a
  // deletion held back while a snapshot was written).
  std::uint64_t emptied_seen_ = 0;
  bool rescan_ = false;
  // TierIndex::cold_released() when poke last looked for a segment to compact.
  std::uint64_t released_seen_ = 0;
  FileTierStats stats_;
  metrics::LogThrottle errors_logged_;
};

}  // namespace replayd::service
