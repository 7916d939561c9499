#include "core/table_config.h"

#include "core/rng.h"
#include "core/storage.h"

namespace replayd {
namespace {

Status validate_episode_config(const TableConfig& config) {
  const std::string who = "table '" + config.name + "': ";
  const SelectorKind sampler = config.sampler.kind;
  if (sampler != SelectorKind::uniform && sampler != SelectorKind::prioritized) {
    return make_error(ErrorCode::invalid_argument,
                      who + "sampler of an episodic table must be uniform or prioritized, got " +
                          std::string(selector_kind_name(sampler)));
  }
  const int reward = config.schema.find(config.episodes.reward_field);
  if (reward < 0) {
    return make_error(ErrorCode::invalid_argument, who + "episodes.reward_field: no field named '" +
                                                       config.episodes.reward_field + "'");
  }
  const Field& field = config.schema.field(static_cast<std::size_t>(reward));
  if (!field.shape.empty() || (field.dtype != DType::float32 && field.dtype != DType::float64)) {
    return make_error(ErrorCode::invalid_argument, who + "episodes.reward_field: field '" +
                                                       field.name +
                                                       "' must be a scalar float32 or float64");
  }
  for (const auto& name : config.episodes.bootstrap_fields) {
    if (config.schema.find(name) < 0) {
      return make_error(ErrorCode::invalid_argument,
                        who + "episodes.bootstrap_fields: no field named '" + name + "'");
    }
  }
  return Ok{};
}

}  // namespace

bool is_valid_table_name(std::string_view name) {
  if (name.empty() || name.size() > Schema::kMaxNameChars) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status validate_table_config(const TableConfig& config, std::uint64_t max_table_bytes) {
  const std::string who = "table '" + config.name + "': ";
  if (!is_valid_table_name(config.name)) {
    return make_error(ErrorCode::invalid_argument,
                      who + "name must be 1-64 characters of letters, digits, '_', '.' and '-'");
  }
  if (config.schema.size() == 0) {
    return make_error(ErrorCode::invalid_argument, who + "fields: schema has no fields");
  }
  if (config.capacity < 1 || config.capacity > Storage::kMaxCapacity) {
    return make_error(ErrorCode::invalid_argument, who + "capacity must be between 1 and " +
                                                       std::to_string(Storage::kMaxCapacity) +
                                                       ", got " + std::to_string(config.capacity));
  }
  const std::uint64_t slot_bytes =
      config.schema.item_bytes() + (config.episodes.enabled ? kEpisodeBytesPerSlot : 0);
  const uint128 data_bytes = static_cast<uint128>(config.capacity) * slot_bytes;
  if (data_bytes > max_table_bytes) {
    return make_error(ErrorCode::resource_exhausted,
                      who + "capacity " + std::to_string(config.capacity) + " x " +
                          std::to_string(slot_bytes) + " bytes per item exceeds the limit of " +
                          std::to_string(max_table_bytes) + " bytes per table");
  }
  if (config.remover == SelectorKind::prioritized) {
    return make_error(ErrorCode::invalid_argument,
                      who + "remover must be fifo, lifo or uniform, got prioritized");
  }
  if (config.rate_limiter.min_size_to_sample > static_cast<std::int64_t>(config.capacity)) {
    return make_error(ErrorCode::invalid_argument,
                      who + "rate_limiter.min_size_to_sample (" +
                          std::to_string(config.rate_limiter.min_size_to_sample) +
                          ") exceeds capacity (" + std::to_string(config.capacity) +
                          "): sampling could never start");
  }
  if (config.episodes.enabled) return validate_episode_config(config);
  return Ok{};
}

}  // namespace replayd
