// Replay distributions per table (core/table/replay_stats.h) as Prometheus families, built
// at scrape time from the histograms each table keeps: draw ages, priorities, times sampled
// at removal, priority-update ages, episode lengths and draw episode ages; the stored
// priorities as a summary; the samples-per-insert gauge; reset counters.
// Threading: pure functions over values the caller copied on the table's thread, except
// summarize_priorities, which reads a Table (io_context thread only).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "prometheus/metric_family.h"

namespace replayd {
class Table;
}

namespace replayd::metrics {

struct TableSnapshot;

// Quantiles of the priorities of a table's stored items, at the moment of a scrape.
struct PrioritySummary {
  static constexpr std::array<double, 5> kQuantiles = {0.0, 0.5, 0.9, 0.99, 1.0};
  std::array<double, kQuantiles.size()> values{};
  std::uint64_t count = 0;  // items looked at
  double sum = 0;           // of their priorities
};

// Reads at most `max_items` stored priorities (every slot when capacity <= max_items, else
// slots at an even stride: an estimate) and returns their exact quantiles.
// Cost: O(min(capacity, max_items)) reads plus a sort of what was read; allocates.
PrioritySummary summarize_priorities(const Table& table, std::size_t max_items = 65536);

// Appends the replay families of `tables` to `families`. Cost: O(tables x buckets).
void append_replay_families(std::span<const TableSnapshot> tables,
                            std::vector<prometheus::MetricFamily>& families);

}  // namespace replayd::metrics
