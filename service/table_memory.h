// Honest capacity (docs/CONFIG.md, `max_tables_total_bytes`): every table counts the bytes
// table_bytes() says it may allocate (all of them committed once it is full), and a new
// table is refused when the server's tables together could then take more memory than
// tables may have: by default the machine's memory (or its cgroup's limit, when lower), so
// that a table that would not fit is refused when created instead of killed when it fills.
// Threading: io_context thread only (machine_memory_bytes: any thread).
#pragma once

#include <cstdint>

#include "core/result.h"
#include "core/table/table_config.h"
#include "service/config.h"
#include "service/table_registry.h"

namespace replayd::service {

// Physical memory, or the cgroup v2 memory.max of this process when lower (read once).
std::uint64_t machine_memory_bytes();

// What the server's tables may take together: limits.max_tables_total_bytes, or the
// machine's memory when that is 0.
std::uint64_t tables_memory_budget(const Limits& limits);

// The bytes every table of `tables` may take (table_bytes of each description). O(tables).
std::uint64_t tables_promised_bytes(const TableRegistry& tables);

// Ok when `config` fits beside `promised` bytes of other tables (held or being created)
// within `budget`; else resource_exhausted naming the table's bytes, what is promised, the
// budget and its key, and every option that would make the table fit (a smaller capacity,
// max_compressed_bytes for a table whose compressed values get the default budget).
Status check_table_fits_memory(const TableConfig& config, std::uint64_t promised,
                               std::uint64_t budget);

}  // namespace replayd::service
