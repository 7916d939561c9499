#include "metrics/plane_metrics.h"

namespace replayd::metrics {
namespace {

prometheus::MetricFamily gauge(std::string name, std::string help, std::uint64_t value) {
  prometheus::ClientMetric metric;
  metric.gauge.value = static_cast<double>(value);
  return {std::move(name), std::move(help), prometheus::MetricType::Gauge, {metric}};
}

}  // namespace

std::vector<prometheus::MetricFamily> plane_families(const PlaneFigures& plane) {
  return {
      gauge("replayd_plane_staging_arenas", "Staging arenas connections hold (map_staging)",
            plane.staging_arenas),
      gauge("replayd_plane_staging_bytes",
            "Host memory of the staging arenas connections hold, in whole pages",
            plane.staging_bytes),
      gauge("replayd_plane_queued_descriptors",
            "Descriptors the server holds in replies not yet written (map_table, map_staging)",
            plane.queued_descriptors),
      gauge("replayd_plane_dropped_table_bytes_mapped",
            "Bytes of dropped tables' shared-memory blocks that open connections were sent "
            "(map_table) and may still map",
            plane.dropped_table_bytes_mapped),
      gauge("replayd_tables_off_plane",
            "Tables whose columns the system refused shared memory: same-host clients sample "
            "them through the socket (their info says why)",
            plane.tables_off_plane),
  };
}

}  // namespace replayd::metrics
