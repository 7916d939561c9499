#include "metrics/replay_metrics.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/table/table.h"
#include "metrics/table_metrics.h"

namespace replayd::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

ClientMetric labelled(const std::string& table) {
  ClientMetric metric;
  metric.label.push_back({"table", table});
  return metric;
}

// A histogram series from the buckets of a Log2Histogram or PriorityHistogram; every bucket
// bound is exported (a fixed set of series per table), each `le` multiplied by `scale`.
template <typename Histogram>
ClientMetric histogram_series(const std::string& table, const Histogram& h, double scale) {
  ClientMetric metric = labelled(table);
  metric.histogram.sample_count = h.count;
  metric.histogram.sample_sum = static_cast<double>(h.sum) * scale;
  metric.histogram.bucket.reserve(Histogram::kBuckets);
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < Histogram::kBuckets; ++b) {
    cumulative += h.buckets[b];
    const double bound = Histogram::upper_bound(b);
    metric.histogram.bucket.push_back({cumulative, std::isinf(bound) ? bound : bound * scale});
  }
  return metric;
}

template <typename Pick>
MetricFamily histogram_family(std::span<const TableSnapshot> tables, std::string name,
                              std::string help, Pick pick, double scale = 1.0,
                              bool episodic_only = false) {
  MetricFamily family{std::move(name), std::move(help), MetricType::Histogram, {}};
  for (const TableSnapshot& table : tables) {
    if (episodic_only && !table.episodic) continue;
    family.metric.push_back(histogram_series(table.name, pick(table.info.replay), scale));
  }
  return family;
}

MetricFamily counter_family(std::span<const TableSnapshot> tables, std::string name,
                            std::string help, std::uint64_t ReplayHistograms::*field) {
  MetricFamily family{std::move(name), std::move(help), MetricType::Counter, {}};
  for (const TableSnapshot& table : tables) {
    ClientMetric metric = labelled(table.name);
    metric.counter.value = static_cast<double>(table.info.replay.*field);
    family.metric.push_back(std::move(metric));
  }
  return family;
}

}  // namespace

PrioritySummary summarize_priorities(const Table& table, std::size_t max_items) {
  const Storage& storage = table.storage();
  const std::uint32_t capacity = storage.capacity();
  const std::uint64_t stride =
      max_items == 0 || capacity <= max_items ? 1 : (capacity + max_items - 1) / max_items;
  std::vector<double> priorities;
  priorities.reserve(std::min<std::uint64_t>(storage.size(), capacity / stride + 1));
  for (std::uint64_t slot = 0; slot < capacity; slot += stride) {
    const auto s = static_cast<std::uint32_t>(slot);
    if (storage.occupied(s)) priorities.push_back(storage.priority(s));
  }
  PrioritySummary summary;
  summary.count = priorities.size();
  if (priorities.empty()) {
    summary.values.fill(NAN);  // Prometheus' convention for a summary without observations
    return summary;
  }
  std::sort(priorities.begin(), priorities.end());
  for (double p : priorities)
    summary.sum += p;
  for (std::size_t q = 0; q < PrioritySummary::kQuantiles.size(); ++q) {
    // The nearest rank: the smallest value with at least q of the values at or below it.
    const double rank = PrioritySummary::kQuantiles[q] * static_cast<double>(priorities.size());
    const auto index = static_cast<std::size_t>(std::max(0.0, std::ceil(rank) - 1));
    summary.values[q] = priorities[std::min(index, priorities.size() - 1)];
  }
  return summary;
}

void append_replay_families(std::span<const TableSnapshot> tables,
                            std::vector<MetricFamily>& families) {
  using H = ReplayHistograms;
  families.push_back(histogram_family(
      tables, "replayd_table_sample_age_inserts",
      "Age of each sampled item at the draw, in items inserted into the table after it "
      "(n-step and sequence draws: of the start step)",
      [](const H& h) -> const auto& { return h.sample_age_inserts; }));
  families.push_back(histogram_family(
      tables, "replayd_table_sample_age_seconds",
      "Age of each sampled item at the draw, in seconds since it was stored",
      [](const H& h) -> const auto& { return h.sample_age_ms; }, 1e-3));
  families.push_back(histogram_family(
      tables, "replayd_table_sample_priority", "Priority of each sampled item at the draw",
      [](const H& h) -> const auto& { return h.sample_priority; }));
  families.push_back(histogram_family(
      tables, "replayd_table_sample_staleness_versions",
      "Staleness of each sampled item at the draw, in versions of the published value the "
      "table follows (its version less the item's; 0 for a newer item); tables that follow "
      "no value, or before the value's first version, count no draw",
      [](const H& h) -> const auto& { return h.sample_staleness_versions; }));
  families.push_back(histogram_family(
      tables, "replayd_table_times_sampled_at_removal",
      "Times an item was sampled, counted when it leaves the table (eviction, expiration, "
      "delete, reset)",
      [](const H& h) -> const auto& { return h.times_sampled_at_removal; }));
  families.push_back(histogram_family(
      tables, "replayd_table_update_age_inserts",
      "Age of each stored key given to update_priorities, in items inserted after it",
      [](const H& h) -> const auto& { return h.update_age_inserts; }));
  families.push_back(histogram_family(
      tables, "replayd_table_episode_length_steps", "Steps of each episode when it ends",
      [](const H& h) -> const auto& { return h.episode_length_steps; }, 1.0, true));
  families.push_back(histogram_family(
      tables, "replayd_table_draw_episode_age_episodes",
      "Age of the episode of each n-step or sequence draw, in episodes opened after it",
      [](const H& h) -> const auto& { return h.draw_episode_age; }, 1.0, true));

  MetricFamily priorities{"replayd_table_stored_priority",
                          "Priorities of the items stored in the table, computed at scrape time "
                          "(over at most 65536 slots at an even stride)",
                          MetricType::Summary,
                          {}};
  for (const TableSnapshot& table : tables) {
    ClientMetric metric = labelled(table.name);
    metric.summary.sample_count = table.priorities.count;
    metric.summary.sample_sum = table.priorities.sum;
    for (std::size_t q = 0; q < PrioritySummary::kQuantiles.size(); ++q)
      metric.summary.quantile.push_back(
          {PrioritySummary::kQuantiles[q], table.priorities.values[q]});
    priorities.metric.push_back(std::move(metric));
  }
  families.push_back(std::move(priorities));

  MetricFamily ratio{"replayd_table_samples_per_insert",
                     "Items sampled per item inserted, as the rate limiter counts them (since the "
                     "table was created or last reset); 0 before the first insert",
                     MetricType::Gauge,
                     {}};
  for (const TableSnapshot& table : tables) {
    ClientMetric metric = labelled(table.name);
    const auto& limiter = table.info.rate_limiter;
    metric.gauge.value = limiter.inserts == 0 ? 0.0
                                              : static_cast<double>(limiter.samples) /
                                                    static_cast<double>(limiter.inserts);
    ratio.metric.push_back(std::move(metric));
  }
  families.push_back(std::move(ratio));

  families.push_back(counter_family(tables, "replayd_table_resets_total",
                                    "reset_table requests applied to the table", &H::resets));
  families.push_back(counter_family(tables, "replayd_table_reset_items_total",
                                    "Items removed from the table by reset_table",
                                    &H::reset_items));
}

}  // namespace replayd::metrics
