#include "service/snapshot/snapshot_restore.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <map>

#include "service/snapshot/snapshot_files.h"
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
  for (const auto& [key, value] : a) {  // keys only the snapshot's description has
    if (key == "seed" || b.contains(key)) continue;
    if (!text.empty()) text += "; ";
    text +=
        std::string(key) + ": " + json::serialize(value) + " in the snapshot, absent in the config";
  }
  return text.empty() ? "the descriptions differ" : text;
}

Result<RestoreOutcome> restore_tables(const std::string& dir,
                                      const std::vector<TableConfig>& configured,
                                      const Limits& limits, bool allow_empty_start,
                                      TableRegistry& registry, ColumnMemorySource* column_memory,
                                      ValueStore* values) {
  RestoreOutcome outcome;
  DecodedSnapshot decoded;
  std::string source;
  std::string newest_problem;  // why the newest snapshot (or the listing) failed
  auto files = list_snapshots(dir);
  if (!files) {
    newest_problem = files.error().message;
  } else {
    if (!files->empty()) outcome.newest_sequence = files->front().sequence;
    const SnapshotLimits snapshot_limits{limits.max_tables, limits.max_table_bytes, column_memory,
                                         limits.max_values, limits.max_value_bytes};
    for (const SnapshotFile& file : *files) {
      auto read = read_snapshot_file(file.path, snapshot_limits);
      if (read) {
        decoded = std::move(read).value();
        source = file.path;
        break;
      }
      if (newest_problem.empty()) newest_problem = read.error().message;
      spdlog::error("snapshot rejected: {}; trying the previous one", read.error().message);
    }
  }
  if (source.empty() && !newest_problem.empty()) {
    const std::string count = files ? std::to_string(files->size()) : std::string("unknown");
    if (!allow_empty_start) {
      return make_error(
          ErrorCode::failed_precondition,
          "no snapshot in data_dir '" + dir + "' could be restored (" + count +
              " found; newest: " + newest_problem +
              "); refusing to start, so that they are not replaced by empty snapshots. Fix "
              "the cause (e.g. raise limits.max_table_bytes or limits.max_tables back), or "
              "start with --allow-empty-start (config allow_empty_start) to serve empty "
              "tables while every existing snapshot is kept");
    }
    spdlog::error(
        "no usable snapshot in '{}' ({} found; newest: {}); starting with empty tables "
        "(allow_empty_start). Every existing snapshot is kept: none is pruned",
        dir, count, newest_problem);
    outcome.kept_through = outcome.newest_sequence;
  }
  outcome.snapshot_path = source;
  const std::uint64_t kept_before = read_kept_through(dir);
  std::uint64_t restored_sequence = 0;
  if (!source.empty()) {
    for (const SnapshotFile& file : *files) {
      if (file.path == source) restored_sequence = file.sequence;
    }
  }
  if (kept_before != 0 && restored_sequence != 0 && restored_sequence <= kept_before) {
    // A kept snapshot is restored: what this process writes descends from it again.
    spdlog::info("restored the kept snapshot {}; retention applies to older ones again", source);
  } else {
    outcome.kept_through = std::max(outcome.kept_through, kept_before);
  }
  if (outcome.kept_through != kept_before) {
    REPLAYD_RETURN_IF_ERROR(write_kept_through(dir, outcome.kept_through));
  }
  if (outcome.kept_through != 0) {
    spdlog::warn(
        "snapshots up to sequence {} in '{}' hold items the served tables do not; they are "
        "never pruned (restore one, or delete them and snapshots-kept-through by hand)",
        outcome.kept_through, dir);
  }

  for (SnapshotValueIn& value : decoded.values) {
    const std::string name = value.name;
    const std::uint64_t version = value.version;
    if (values == nullptr) break;
    if (auto restored_value = values->restore(std::move(value)); !restored_value) {
      spdlog::error("published value '{}': not restored from {}: {}", name, source,
                    restored_value.error().message);
    } else {
      spdlog::info("published value '{}': restored version {} from {}", name, version, source);
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
    // A file tier's columns are private memory (its cold rows' pages are given back).
    auto table = Table::create(config, limits.max_table_bytes,
                               config.file_tier.enabled() ? nullptr : column_memory);
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
  return outcome;
}

}  // namespace replayd::service
