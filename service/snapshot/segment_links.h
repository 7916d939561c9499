// The segment files of tables with a file tier, kept beside a snapshot (docs/FILE_TIER.md,
// "Snapshots and restarts"): "snapshot-<sequence>.segments/<table>/segment-<id>", hard links
// to the tier's own files, made before the image is renamed into place. So an image's cold
// rows stay readable after the tier deletes a segment, and nothing is copied: a link costs
// a directory entry, and a restore links the files back into a new tier directory. The tier
// and data directories must be on one filesystem (hard links cannot cross one).
// Threading: plain blocking POSIX calls: the snapshot child process, start and shutdown.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace replayd::service {

// One table's segments: (id, path) of each.
struct TierSegments {
  std::string table;
  std::vector<std::pair<std::uint32_t, std::string>> segments;
};

// The directory holding the segments kept for the snapshot at `snapshot_path`.
std::string segments_dir_of(const std::string& snapshot_path);

// Links every table's segments into segments_dir_of(snapshot_path)/<table>/ and makes them
// and the links durable (fdatasync of each file, fsync of each directory). Errors name the
// file; EXDEV says that the tier directory is on another filesystem. Nothing to link: no
// directory is made.
Status link_segments(const std::string& snapshot_path, const std::vector<TierSegments>& tables);

// Removes the kept segments of a snapshot (pruned, or never completed). Missing: nothing.
void remove_segments_of(const std::string& snapshot_path);

// The kept segments of `table` in the snapshot at `snapshot_path`: (id, path) of each file
// named segment-<id>, ascending. A missing directory holds none.
std::vector<std::pair<std::uint32_t, std::string>> kept_segments(const std::string& snapshot_path,
                                                                 const std::string& table);

// Whether `a` and `b` (existing directories) are on one filesystem; an error names the one
// that cannot be examined.
Result<bool> same_filesystem(const std::string& a, const std::string& b);

}  // namespace replayd::service
