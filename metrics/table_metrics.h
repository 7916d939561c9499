// Per-table metric families, built at scrape time from the tables that exist then: items,
// capacity, the table's lifetime counters, and requests waiting on its rate limiter.
// A table that is dropped disappears from the exposition; one recreated under the same name
// starts again from 0, which Prometheus treats as a counter reset (rate() stays correct).
// Threading: pure functions over values the caller copied on the table's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/table/table.h"
#include "metrics/replay_metrics.h"
#include "prometheus/metric_family.h"

namespace replayd::metrics {

// A table's file tier (docs/FILE_TIER.md) at the scrape.
struct TierFigures {
  std::uint64_t hot_rows = 0;
  std::uint64_t cold_rows = 0;
  std::uint64_t hot_bytes = 0;   // the hot rows' fields in RAM
  std::uint64_t file_bytes = 0;  // its live segment files
  std::uint64_t rows_written = 0;
  std::uint64_t cold_reads = 0;    // cold rows read back
  std::uint64_t read_batches = 0;  // requests that read cold rows
  double read_seconds = 0;         // their time waiting on the reads
  std::uint64_t rows_moved = 0;    // live records compaction copied out of half-live segments
};

// What the service copies out of one table when /metrics is served.
struct TableSnapshot {
  std::string name;
  TableInfo info;
  std::uint64_t waiting_inserts = 0;  // insert requests parked by the rate limiter now
  std::uint64_t waiting_samples = 0;  // sample requests parked by the rate limiter now
  bool episodic = false;              // episode families are exported for episodic tables only
  PrioritySummary priorities;         // summarize_priorities(table), taken at the scrape
  std::optional<TierFigures> tier;    // tables with a file tier only
};

// Families replayd_tables, replayd_table_* (with the replay families of replay_metrics.h),
// replayd_rate_limiter_waiting_requests, and for tables with a file tier replayd_tier_*.
// Cost: O(tables).
std::vector<prometheus::MetricFamily> table_families(std::span<const TableSnapshot> tables);

}  // namespace replayd::metrics
