#include "service/table_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

namespace replayd::service {
namespace {

std::string gib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

// memory.max of the cgroup this process is in (cgroup v2); 0 when unknown or "max".
std::uint64_t cgroup_memory_limit() {
  std::ifstream membership("/proc/self/cgroup");
  std::string line;
  std::string path;
  while (std::getline(membership, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty()) return 0;
  std::ifstream limit("/sys/fs/cgroup" + path + "/memory.max");
  std::string text;
  if (!(limit >> text) || text == "max") return 0;
  try {
    return std::stoull(text);
  } catch (...) {
    return 0;
  }
}

}  // namespace

std::uint64_t machine_memory_bytes() {
  static const std::uint64_t bytes = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGESIZE);
    std::uint64_t physical =
        pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                              : 0;
    const std::uint64_t cgroup = cgroup_memory_limit();
    if (cgroup != 0 && (physical == 0 || cgroup < physical)) physical = cgroup;
    return physical;
  }();
  return bytes;
}

std::uint64_t tables_memory_budget(const Limits& limits) {
  return limits.max_tables_total_bytes != 0 ? limits.max_tables_total_bytes
                                            : machine_memory_bytes();
}

std::uint64_t tables_promised_bytes(const TableRegistry& tables) {
  std::uint64_t total = 0;
  for (const auto& hosted : tables.list()) {
    total += static_cast<std::uint64_t>(
        std::min<uint128>(table_bytes(hosted->table->config()).total(), UINT64_MAX / 4));
  }
  return total;
}

Status check_table_fits_memory(const TableConfig& config, std::uint64_t promised,
                               std::uint64_t budget) {
  if (budget == 0) return Ok{};  // the machine's memory is unknown: nothing to check against
  const TableBytes bytes = table_bytes(config);
  const uint128 total = bytes.total();
  if (total + promised <= budget) return Ok{};
  const std::uint64_t left = promised < budget ? budget - promised : 0;
  const auto mine = static_cast<std::uint64_t>(std::min<uint128>(total, UINT64_MAX / 4));
  std::string message =
      "table '" + config.name + "' may take " + gib(mine) + " once full (data " +
      gib(static_cast<std::uint64_t>(std::min<uint128>(bytes.data, UINT64_MAX / 4))) +
      ", the rest bookkeeping), and the tables held or being created may take " + gib(promised) +
      ": together more than the " + gib(budget) +
      " tables may take on this server (limits.max_tables_total_bytes; by default the "
      "machine's memory, " +
      gib(machine_memory_bytes()) + "), so it could not be filled without running out of memory";
  const std::uint64_t per_item = mine / std::max<std::uint64_t>(config.capacity, 1);
  message += ". To make it fit: a capacity of at most " +
             std::to_string(per_item ? left / per_item : 0) + " items";
  if (config.schema.has_compression() && config.max_compressed_bytes == 0) {
    message += "; max_compressed_bytes: its compressed values are budgeted " +
               gib(compressed_budget(config)) +
               " by default (capacity x the largest frame accepted), set it to the size you "
               "expect them to take";
  }
  if (!config.file_tier.enabled() && !config.episodes.enabled) {
    message +=
        "; a file tier (\"file_tier\": {\"ram_bytes\": N}, on a server started with "
        "--tier-dir): only N bytes of rows stay in RAM, the rest on disk";
  }
  message +=
      "; drop tables you no longer need; or raise limits.max_tables_total_bytes "
      "(memory the machine does not have is taken only as the tables fill)";
  return make_error(ErrorCode::resource_exhausted, std::move(message));
}

}  // namespace replayd::service
