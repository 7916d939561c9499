// Snapshot files in the data directory (docs/SNAPSHOT.md): names, crash-safe creation,
// listing and pruning, and the file-backed SnapshotSink / SnapshotSource.
// A snapshot is "snapshot-<sequence, 20 digits>.rsnap". It is written as "<name>.tmp",
// fsynced, renamed into place, and the directory fsynced: a file with the final name is
// always complete. "*.tmp" files are leftovers of an interrupted write.
// Threading: plain blocking POSIX calls; used by the snapshot child process, at start and at
// shutdown, never on the io_context while it serves.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/snapshot/snapshot_io.h"
#include "core/snapshot/table_snapshot.h"

namespace replayd::service {

struct SnapshotFile {
  std::string path;
  std::uint64_t sequence = 0;
};

// The path snapshot number `sequence` has in `dir`.
std::string snapshot_path(const std::string& dir, std::uint64_t sequence);

// The error of a failed file operation: `what: strerror(error_number)`; a full disk, a quota
// or a file-size limit is resource_exhausted, anything else failed_precondition.
Error file_error(const std::string& what, int error_number);

// Creates `dir` (and its parents) when missing. Errors name the directory and the reason.
Status ensure_snapshot_dir(const std::string& dir);

// Complete snapshots in `dir`, newest (highest sequence) first. A missing directory holds none.
Result<std::vector<SnapshotFile>> list_snapshots(const std::string& dir);

// Deletes leftover "*.tmp" files of interrupted writes, and kept file tier segments
// ("*.segments", service/snapshot/segment_links.h) of snapshots that do not exist; returns
// how many.
std::size_t remove_snapshot_temporaries(const std::string& dir);

// Deletes all but the newest `keep` (>= 1) snapshots of sequence above `kept_through`;
// those at or below it are never deleted (nor counted). A deleted snapshot's kept file tier
// segments go with it. Logs nothing, returns how many went.
std::size_t prune_snapshots(const std::string& dir, std::uint32_t keep,
                            std::uint64_t kept_through = 0);

// The retention floor, kept in "<dir>/snapshots-kept-through" across restarts: snapshots with
// a sequence up to it hold items no later snapshot holds (a start restored none of them), so
// pruning never deletes them. 0 (no file, or an unreadable one reads as 0) means none.
std::uint64_t read_kept_through(const std::string& dir);
// Writes (sequence > 0) or removes (0) the floor, crash-safely. Errors name the file.
Status write_kept_through(const std::string& dir, std::uint64_t sequence);

// Writes snapshot number `sequence` into `dir` crash-safely: `produce` writes the image into
// the sink; then fsync, rename, fsync of the directory. On any error the temporary file is
// removed and no snapshot appears. `pause_ms` (test-only, 0 in production) sleeps that long
// after the first write, to widen the window in which a crash leaves a partial temporary.
// Returns the final path and what `produce` reported.
struct WrittenSnapshot {
  std::string path;
  SnapshotStats stats;
};
Result<WrittenSnapshot> write_snapshot_file(
    const std::string& dir, std::uint64_t sequence,
    const std::function<Result<SnapshotStats>(SnapshotSink&)>& produce, std::uint32_t pause_ms = 0);

// Reads an open file descriptor (not owned) from its current offset.
class FileSource final : public SnapshotSource {
 public:
  explicit FileSource(int fd) : fd_(fd) {}
  Result<std::size_t> read(std::span<std::byte> out) override;

 private:
  int fd_;
};

// Opens, decodes and closes one snapshot file. Errors are prefixed with the path.
Result<DecodedSnapshot> read_snapshot_file(const std::string& path, const SnapshotLimits& limits);

}  // namespace replayd::service
