// Restoring tables at start (docs/SNAPSHOT.md, "Restore"): loads the newest snapshot in the
// data directory that decodes completely, falling back to older ones (each rejection logged
// with its reason), and merges it with the configured tables:
//   - a configured table whose snapshot twin has the same description (ignoring seed) is
//     restored from the snapshot; one whose description differs starts empty from the
//     config, and the differing keys are logged;
//   - a snapshot table absent from the config (created at run time) is restored;
//   - a configured table absent from the snapshot starts empty;
//   - the snapshot's published values are restored into `values` (one this server's
//     budgets refuse is left out, logged).
// Threading: blocking file reads; runs in Server::open(), before anything is served.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/table/table_config.h"
#include "service/config.h"
#include "service/table_registry.h"
#include "service/values/value_store.h"

namespace replayd::service {

struct RestoreOutcome {
  // The highest snapshot sequence found in `dir` (0 when none), so that new snapshots sort
  // after every existing one.
  std::uint64_t newest_sequence = 0;
  // Snapshots up to this sequence are never pruned (0: none). Set when snapshots exist but
  // none was restored (allowed by allow_empty_start): the tables served hold none of their
  // items. Persisted (read_kept_through), so later starts that restore one of the empty
  // snapshots written since keep it too; cleared by a start that restores one of the kept.
  std::uint64_t kept_through = 0;
  // The snapshot restored (empty: none); a table with a file tier finds its segments beside it.
  std::string snapshot_path;
};

// Adds every table to `registry` per the rule above.
// Errors: a configured table that cannot be created (as without snapshots), and, unless
// `allow_empty_start`, snapshots that exist (or a directory that cannot be listed) of
// which none can be restored: failed_precondition naming the newest one's reason, so the
// server refuses to start rather than serve empty tables and later replace the snapshots.
// Tables get their column blocks from `column_memory` (null: private memory).
Result<RestoreOutcome> restore_tables(const std::string& dir,
                                      const std::vector<TableConfig>& configured,
                                      const Limits& limits, bool allow_empty_start,
                                      TableRegistry& registry,
                                      ColumnMemorySource* column_memory = nullptr,
                                      ValueStore* values = nullptr);

// Why two descriptions differ, ignoring the seed: "capacity: 1000 in the snapshot, 2000 in
// the config; ...". Empty when they describe the same table.
std::string describe_difference(const TableConfig& snapshot, const TableConfig& config);

}  // namespace replayd::service
