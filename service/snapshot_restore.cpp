#include "service/snapshot_restore.h"

#include <spdlog/spdlog.h>
#include <map>

#include "service/snapshot_files.h"
#include "service/table_description.h"

namespace replayd::service {
namespace json = boost::json;

std::string describe_difference(const TableConfig& snapshot, const TableConfig& config) {
  if (same_table_shape(snapshot, config)) return "";
  const json::object a = describe_table(snapshot);
  const json::object b = describe_table(config);
  std::string text;
  for (const auto& [key, value] : b) {
    if (key == "seed") continue;
    const json::value* other = a.if_contains(key);
    if (other && *other == value) continue;
    if (!text.empty()) text += "; ";
    text += std::string(key) + ": " + (other ? json::serialize(*other) : "absent") +
            " in the snapshot, " + json::serialize(value) + " in the config";
  }
  return text.empty() ? "the descriptions differ" : text;
}

Result<std::uint64_t> restore_tables(const std::string& dir,
                                     const std::vector<TableConfig>& configured,
                                     const Limits& limits, TableRegistry& registry) {
  std::uint64_t newest_sequence = 0;
  DecodedSnapshot decoded;
  std::string source;
  auto files = list_snapshots(dir);
  if (!files) {
    spdlog::error("{}; starting without a snapshot", files.error().message);
  } else {
    if (!files->empty()) newest_sequence = files->front().sequence;
    const SnapshotLimits snapshot_limits{limits.max_tables, limits.max_table_bytes};
    for (const SnapshotFile& file : *files) {
      auto read = read_snapshot_file(file.path, snapshot_limits);
      if (read) {
        decoded = std::move(read).value();
        source = file.path;
        break;
      }
      spdlog::error("snapshot rejected: {}; trying the previous one", read.error().message);
    }
    if (source.empty() && !files->empty()) {
      spdlog::error("no usable snapshot in '{}'; starting with empty tables", dir);
    }
  }

  std::map<std::string, std::unique_ptr<Table>, std::less<>> restored;
  for (auto& table : decoded.tables) {
    std::string name = table->name();
    restored.emplace(std::move(name), std::move(table));
  }
  for (const TableConfig& config : configured) {
    auto twin = restored.find(config.name);
    if (twin != restored.end()) {
      std::unique_ptr<Table> table = std::move(twin->second);
      restored.erase(twin);
      const std::string difference = describe_difference(table->config(), config);
      if (difference.empty()) {
        spdlog::info("table '{}': restored {} items from {}", config.name, table->size(), source);
        registry.add(std::move(table));
        continue;
      }
      spdlog::warn(
          "table '{}': not restored from {}: its description differs from the config "
          "({}); starting empty as configured",
          config.name, source, difference);
    }
    auto table = Table::create(config, limits.max_table_bytes);
    if (!table) return table.error();
    registry.add(std::move(table).value());
  }
  for (auto& [name, table] : restored) {
    if (registry.size() >= limits.max_tables) {
      spdlog::error("table '{}': not restored from {}: the server already holds max_tables = {}",
                    name, source, limits.max_tables);
      continue;
    }
    spdlog::info("table '{}': restored {} items from {} (created at run time)", name, table->size(),
                 source);
    registry.add(std::move(table));
  }
  return newest_sequence;
}

}  // namespace replayd::service
