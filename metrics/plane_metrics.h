// Figures of the shared-memory data plane and of snapshots, read by the service at scrape
// time (the plane's budget, the last snapshot) and rendered as gauges: host memory and
// descriptors that no table accounts for, and what the last snapshot saved or dropped.
// Threading: built and rendered on the io_context thread, at scrape time.
#pragma once

#include <cstdint>
#include <vector>

#include <prometheus/metric_family.h>

namespace replayd::metrics {

struct PlaneFigures {
  std::uint64_t staging_arenas = 0;
  std::uint64_t staging_bytes = 0;               // whole pages
  std::uint64_t queued_descriptors = 0;          // in replies not yet written
  std::uint64_t dropped_table_bytes_mapped = 0;  // dropped tables' blocks sent to open connections
  std::uint64_t tables_off_plane = 0;            // tables the system refused shared memory
};

// Families replayd_plane_* and replayd_tables_off_plane. Cost: O(1).
std::vector<prometheus::MetricFamily> plane_families(const PlaneFigures& plane);

}  // namespace replayd::metrics
