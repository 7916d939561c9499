// Restoring tables at start (docs/SNAPSHOT.md, "Restore"): loads the newest snapshot in the
// data directory that decodes completely, falling back to older ones (each rejection logged
// with its reason), and merges it with the configured tables:
//   - a configured table whose snapshot twin has the same description (ignoring seed) is
//     restored from the snapshot; one whose description differs starts empty from the
//     config, and the differing keys are logged;
//   - a snapshot table absent from the config (created at run time) is restored;
//   - a configured table absent from the snapshot starts empty.
// Threading: blocking file reads; runs in Server::open(), before anything is served.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/table_config.h"
#include "service/config.h"
#include "service/table_registry.h"

namespace replayd::service {

// Adds every table to `registry` per the rule above. Returns the highest snapshot sequence
// number found in `dir` (0 when none), so that new snapshots sort after every existing one.
// Errors: only a configured table that cannot be created (as without snapshots); a bad or
// unreadable snapshot is never an error.
Result<std::uint64_t> restore_tables(const std::string& dir,
                                     const std::vector<TableConfig>& configured,
                                     const Limits& limits, TableRegistry& registry);

// Why two descriptions differ, ignoring the seed: "capacity: 1000 in the snapshot, 2000 in
// the config; ...". Empty when they describe the same table.
std::string describe_difference(const TableConfig& snapshot, const TableConfig& config);

}  // namespace replayd::service
