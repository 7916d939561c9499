#include "metrics/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace replayd::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily single(std::string name, std::string help, MetricType type, double value) {
  ClientMetric metric;
  if (type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return MetricFamily{std::move(name), std::move(help), type, {std::move(metric)}};
}

struct ProcStat {
  double cpu_ticks = 0;    // utime + stime
  double start_ticks = 0;  // since boot
  double virtual_bytes = 0;
  double resident_pages = 0;
};

// Fields of /proc/self/stat after "(comm)", whose name may hold spaces and parentheses.
std::optional<ProcStat> read_proc_stat() {
  std::ifstream in("/proc/self/stat");
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  // Field 3 (state) is the first after ")": fields 3..24 are read, numbered as in proc(5).
  std::string field;
  ProcStat stat;
  for (int number = 3; number <= 24 && fields >> field; ++number) {
    try {
      if (number == 14 || number == 15) stat.cpu_ticks += std::stod(field);
      if (number == 22) stat.start_ticks = std::stod(field);
      if (number == 23) stat.virtual_bytes = std::stod(field);
      if (number == 24) {
        stat.resident_pages = std::stod(field);
        return stat;
      }
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<double> boot_time_seconds() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value) return value;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

std::optional<double> open_fds() {
  std::error_code ec;
  double count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++count;
  }
  if (ec) return std::nullopt;
  return count;
}

}  // namespace

std::vector<MetricFamily> process_families() {
  std::vector<MetricFamily> families;
  const double ticks_per_second = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page_bytes = static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (const auto stat = read_proc_stat(); stat && ticks_per_second > 0 && page_bytes > 0) {
    families.push_back(single("process_cpu_seconds_total",
                              "Total user and system CPU time spent in seconds",
                              MetricType::Counter, stat->cpu_ticks / ticks_per_second));
    families.push_back(single("process_resident_memory_bytes", "Resident memory size in bytes",
                              MetricType::Gauge, stat->resident_pages * page_bytes));
    families.push_back(single("process_virtual_memory_bytes", "Virtual memory size in bytes",
                              MetricType::Gauge, stat->virtual_bytes));
    if (const auto boot = boot_time_seconds()) {
      families.push_back(single("process_start_time_seconds",
                                "Start time of the process since unix epoch in seconds",
                                MetricType::Gauge, *boot + stat->start_ticks / ticks_per_second));
    }
  }
  if (const auto fds = open_fds()) {
    families.push_back(
        single("process_open_fds", "Number of open file descriptors", MetricType::Gauge, *fds));
  }
  if (rlimit limit{}; ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    families.push_back(single("process_max_fds", "Maximum number of open file descriptors",
                              MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  return families;
}

}  // namespace replayd::metrics
