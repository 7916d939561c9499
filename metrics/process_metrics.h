// Process metric families with the standard Prometheus names (process_resident_memory_bytes,
// process_cpu_seconds_total, process_open_fds, ...), read from /proc/self at scrape time.
// A figure that cannot be read (no /proc) is left out rather than reported wrong.
// Threading: any thread; reads files, no state.
#pragma once

#include <vector>

#include "prometheus/metric_family.h"

namespace replayd::metrics {

// Cost: a few small /proc reads and one directory listing of /proc/self/fd.
std::vector<prometheus::MetricFamily> process_families();

}  // namespace replayd::metrics
