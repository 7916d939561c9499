#include "metrics/table_metrics.h"

#include <functional>
#include <tuple>

namespace replayd::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

ClientMetric table_series(const std::string& table, double value, MetricType type) {
  ClientMetric metric;
  metric.label.push_back({"table", table});
  if (type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return metric;
}

// One family with one series per table, valued by `value_of`.
MetricFamily per_table(std::span<const TableSnapshot> tables, std::string name, std::string help,
                       MetricType type,
                       const std::function<double(const TableSnapshot&)>& value_of) {
  MetricFamily family{std::move(name), std::move(help), type, {}};
  family.metric.reserve(tables.size());
  for (const TableSnapshot& table : tables) {
    family.metric.push_back(table_series(table.name, value_of(table), type));
  }
  return family;
}

double as_double(std::uint64_t value) {
  return static_cast<double>(value);
}

// The file tier families: series for the tables that have one.
void append_tier_families(std::span<const TableSnapshot> tables,
                          std::vector<MetricFamily>& families) {
  MetricFamily rows{"replayd_tier_rows",
                    "Stored rows of a table with a file tier, by tier",
                    MetricType::Gauge,
                    {}};
  MetricFamily bytes{"replayd_tier_bytes",
                     "Bytes of a file tier's rows: ram (hot rows' fields), disk (live segments)",
                     MetricType::Gauge,
                     {}};
  MetricFamily written{"replayd_tier_rows_written_total",
                       "Rows written out to segment files",
                       MetricType::Counter,
                       {}};
  MetricFamily reads{
      "replayd_tier_cold_reads_total", "Cold rows read back from disk", MetricType::Counter, {}};
  MetricFamily batches{"replayd_tier_read_requests_total",
                       "Requests that read cold rows back (each one pool job)",
                       MetricType::Counter,
                       {}};
  MetricFamily seconds{"replayd_tier_read_seconds_total",
                       "Time requests waited on their cold reads (divide by "
                       "replayd_tier_read_requests_total for the mean)",
                       MetricType::Counter,
                       {}};
  MetricFamily moved{"replayd_tier_rows_moved_total",
                     "Live rows compaction copied out of half-live segments (removers other "
                     "than fifo)",
                     MetricType::Counter,
                     {}};
  for (const TableSnapshot& table : tables) {
    if (!table.tier) continue;
    const TierFigures& tier = *table.tier;
    for (const auto& [where, count, held] : {std::tuple{"ram", tier.hot_rows, tier.hot_bytes},
                                             std::tuple{"disk", tier.cold_rows, tier.file_bytes}}) {
      ClientMetric row = table_series(table.name, as_double(count), MetricType::Gauge);
      row.label.push_back({"tier", where});
      rows.metric.push_back(std::move(row));
      ClientMetric byte = table_series(table.name, as_double(held), MetricType::Gauge);
      byte.label.push_back({"tier", where});
      bytes.metric.push_back(std::move(byte));
    }
    written.metric.push_back(
        table_series(table.name, as_double(tier.rows_written), MetricType::Counter));
    reads.metric.push_back(
        table_series(table.name, as_double(tier.cold_reads), MetricType::Counter));
    batches.metric.push_back(
        table_series(table.name, as_double(tier.read_batches), MetricType::Counter));
    seconds.metric.push_back(table_series(table.name, tier.read_seconds, MetricType::Counter));
    moved.metric.push_back(
        table_series(table.name, as_double(tier.rows_moved), MetricType::Counter));
  }
  for (MetricFamily* family : {&rows, &bytes, &written, &reads, &batches, &seconds, &moved})
    families.push_back(std::move(*family));
}

}  // namespace

std::vector<MetricFamily> table_families(std::span<const TableSnapshot> tables) {
  std::vector<MetricFamily> families;
  ClientMetric count;
  count.gauge.value = as_double(tables.size());
  families.push_back(
      MetricFamily{"replayd_tables", "Tables on the server", MetricType::Gauge, {count}});

  const auto gauge = MetricType::Gauge;
  const auto counter = MetricType::Counter;
  families.push_back(per_table(tables, "replayd_table_items", "Items stored in the table", gauge,
                               [](const auto& t) { return as_double(t.info.size); }));
  families.push_back(per_table(tables, "replayd_table_capacity_items",
                               "Items the table holds before it evicts", gauge,
                               [](const auto& t) { return as_double(t.info.capacity); }));
  families.push_back(per_table(tables, "replayd_table_inserts_total",
                               "Items inserted into the table since it was created", counter,
                               [](const auto& t) { return as_double(t.info.counters.inserts); }));
  families.push_back(per_table(tables, "replayd_table_samples_total",
                               "Items sampled from the table (a batch of n counts n)", counter,
                               [](const auto& t) { return as_double(t.info.counters.samples); }));
  families.push_back(per_table(
      tables, "replayd_table_priority_updates_total", "Priority updates applied to stored items",
      counter, [](const auto& t) { return as_double(t.info.counters.priority_updates); }));
  families.push_back(
      per_table(tables, "replayd_table_stale_updates_total",
                "Priority updates ignored because the key was no longer stored", counter,
                [](const auto& t) { return as_double(t.info.counters.stale_updates); }));
  families.push_back(per_table(tables, "replayd_table_deletes_total",
                               "Items deleted by delete requests", counter,
                               [](const auto& t) { return as_double(t.info.counters.deletes); }));
  families.push_back(
      per_table(tables, "replayd_table_stale_deletes_total",
                "Deletes ignored because the key was no longer stored", counter,
                [](const auto& t) { return as_double(t.info.counters.stale_deletes); }));
  families.push_back(
      per_table(tables, "replayd_table_version_drops_total",
                "Items dropped because their policy version fell more than drop_behind versions "
                "behind the value the table follows",
                counter, [](const auto& t) { return as_double(t.info.counters.version_drops); }));
  families.push_back(per_table(tables, "replayd_table_evictions_total",
                               "Items evicted by the remover to make room for inserts", counter,
                               [](const auto& t) { return as_double(t.info.counters.evictions); }));
  families.push_back(
      per_table(tables, "replayd_table_expirations_total",
                "Items removed after being sampled max_times_sampled times", counter,
                [](const auto& t) { return as_double(t.info.counters.expirations); }));

  MetricFamily waiting{"replayd_rate_limiter_waiting_requests",
                       "Requests waiting on the table's rate limiter now, by table and op",
                       MetricType::Gauge,
                       {}};
  for (const TableSnapshot& table : tables) {
    for (const auto& [op, value] :
         {std::pair{"insert", table.waiting_inserts}, std::pair{"sample", table.waiting_samples}}) {
      ClientMetric metric;
      metric.label.push_back({"op", op});
      metric.label.push_back({"table", table.name});
      metric.gauge.value = as_double(value);
      waiting.metric.push_back(std::move(metric));
    }
  }
  families.push_back(std::move(waiting));
  append_tier_families(tables, families);
  append_replay_families(tables, families);
  // A family without series (no tables) is left out, as client libraries do.
  std::erase_if(families, [](const MetricFamily& family) { return family.metric.empty(); });
  return families;
}

}  // namespace replayd::metrics
