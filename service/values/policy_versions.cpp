#include "service/values/policy_versions.h"

#include <spdlog/spdlog.h>

namespace replayd::service {

void adopt_policy_version(ServiceContext& service, HostedTable& hosted) {
  const std::string& name = hosted.table->config().versions.value;
  if (name.empty()) return;
  const auto found = service.values.values().find(name);
  if (found == service.values.values().end() || !found->second->current) return;
  hosted.table->set_policy_version(found->second->version());
}

void follow_committed_value(ServiceContext& service, const PublishedValue& value) {
  const std::uint64_t version = value.version();
  for (const auto& hosted : service.tables.list()) {
    Table& table = *hosted->table;
    const VersionsConfig& config = table.config().versions;
    if (config.value != value.name) continue;
    table.set_policy_version(version);
    if (!config.drop_behind || version <= *config.drop_behind) continue;
    const std::uint64_t dropped = table.drop_versions_below(version - *config.drop_behind);
    if (dropped == 0) continue;
    spdlog::debug("table '{}': dropped {} items of versions below {} (value '{}' version {})",
                  table.name(), dropped, version - *config.drop_behind, value.name, version);
    table_changed(*hosted);
  }
}

Result<VersionBound> VersionBound::parse(JsonReader& args, const Table& table) {
  VersionBound bound;
  REPLAYD_ASSIGN_OR_RETURN(auto min_version, args.optional_uint("min_version"));
  REPLAYD_ASSIGN_OR_RETURN(auto max_staleness, args.optional_uint("max_staleness"));
  REPLAYD_ASSIGN_OR_RETURN(auto value, args.optional_string("value"));
  if (min_version && max_staleness) {
    return args.error("max_staleness",
                      "give either \"min_version\" or \"max_staleness\", not both");
  }
  if (value && !max_staleness) return args.error("value", "needs \"max_staleness\"");
  bound.min_version_ = min_version.value_or(0);
  bound.max_staleness_ = max_staleness;
  if (max_staleness) {
    bound.value_ = value ? *value : table.config().versions.value;
    if (bound.value_.empty()) {
      return args.error("max_staleness",
                        "needs a value to count versions of: name it with \"value\", or create "
                        "table '" +
                            table.name() + "' with \"versions\": {\"value\": NAME}");
    }
    if (!is_valid_value_name(bound.value_)) {
      return args.error("value", not_a_value_name());
    }
  }
  if (bound.bounded()) REPLAYD_RETURN_IF_ERROR(table.check_min_version());
  return bound;
}

std::uint64_t VersionBound::resolve(const ValueStore& values) const {
  if (!max_staleness_) return min_version_;
  const auto found = values.values().find(value_);
  const std::uint64_t current = found == values.values().end() ? 0 : found->second->version();
  return current > *max_staleness_ ? current - *max_staleness_ : 0;
}

}  // namespace replayd::service
