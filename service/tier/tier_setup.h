// Setting up a table's file tier in the server (docs/FILE_TIER.md): whether this server
// allows one, and the table's own directory under tier_dir.
// Threading: check_file_tier_allowed and attach_file_tier on the io_context thread;
// make_tier_dir blocks on the disk (run it off that thread once serving).
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "core/table/table_config.h"
#include "service/service_context.h"

namespace replayd::service {

// Ok unless `config` has a file tier and this server cannot hold one: failed_precondition
// naming what is missing (a tier_dir) or in the way (context.file_tier_refusal). O(1).
Status check_file_tier_allowed(const ServiceContext& context, const TableConfig& config);

// Creates `root`/<table>.<id> (and `root` when missing); the path, or an error naming it.
Result<std::string> make_tier_dir(const std::string& root, const std::string& table,
                                  std::uint64_t id);

// Gives `hosted` its FileTier in `dir` (made by make_tier_dir). Precondition: the table's
// config has a file tier and context.io_pool is set.
void attach_file_tier(ServiceContext& context, HostedTable& hosted, std::string dir,
                      asio::any_io_executor executor);

// At start, for a table restored from the snapshot at `snapshot_path` (empty: none): gives it
// a new tier directory holding its segments, hard links to those kept beside the snapshot
// (service/snapshot/segment_links.h: nothing is copied), and its FileTier, which reads them
// and writes new rows to new segments. Errors (failed_precondition) name a cold row whose
// segment is missing or too short. Blocks on the disk.
Status restore_file_tier(ServiceContext& context, HostedTable& hosted,
                         const std::string& snapshot_path, asio::any_io_executor executor);

// At start: makes `root` and holds it for this process (an exclusive lock on
// root/replayd.lock: a second server on the same tier_dir is refused, naming it), and
// removes the table directories an earlier process left there (it was killed: its rows are
// in snapshots, if anywhere). Returns the lock's descriptor (close it to let go). Blocks.
Result<int> claim_tier_dir(const std::string& root);

}  // namespace replayd::service
