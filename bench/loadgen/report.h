// Report: a run's totals per operation (throughput and latency quantiles), the server's CPU
// use and the machine limits, printed as a table and written as JSON. Pure formatting over
// data the run collected; one thread.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "machine_limits.h"
#include "options.h"
#include "worker_processes.h"
#include "workload.h"

namespace replayd::loadgen {

struct OpReport {
  std::string op;  // insert, sample, update
  std::uint64_t calls = 0;
  std::uint64_t items = 0;
  double items_per_s = 0;  // transitions (or keys, for update) per second, all workers
  double mb_per_s = 0;     // items_per_s * bytes per item / 1e6 (update: 16 B per key)
  double p50_us = 0, p99_us = 0, p999_us = 0;
};

struct RunReport {
  LoadgenOptions options;
  Workload workload;
  std::string server_address;
  double elapsed_s = 0;      // the longest worker's time
  double server_cpu_s = -1;  // CPU the server used while measured; -1 when not started here
  std::uint64_t errors = 0;
  std::uint64_t failed_workers = 0;
  std::vector<OpReport> ops;
  bool has_limits = false;
  MachineLimits limits;
};

// Sums the workers' results into per-op throughput and merged latency histograms.
RunReport summarize(const LoadgenOptions& options, const Workload& workload, const WorkerRun& run);

// Transitions inserted plus sampled per second of server CPU (user + system): what one
// server core sustains, whatever else the machine runs. 0 when the server was not started here.
double server_transitions_per_cpu_s(const RunReport& report);

void print_table(std::ostream& out, const RunReport& report);
boost::json::object to_json(const RunReport& report);

}  // namespace replayd::loadgen
