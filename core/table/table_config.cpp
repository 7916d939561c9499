#include "core/table/table_config.h"

#include "core/tier/tier_index.h"

#include <algorithm>

#include "core/rng.h"
#include "core/storage/blob_column.h"
#include "core/storage/storage.h"
#include "core/storage/zstd_value.h"
#include "core/table/replay_stats.h"
#include "core/tier/tier_index.h"

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
  if (!field.shape.empty() || field.is_frame() ||
      (field.dtype != DType::float32 && field.dtype != DType::float64)) {
    return make_error(ErrorCode::invalid_argument,
                      who + "episodes.reward_field: field '" + field.name +
                          "' must be a scalar float32 or float64, no frame field");
  }
  for (const auto& name : config.episodes.bootstrap_fields) {
    const int found = config.schema.find(name);
    if (found < 0) {
      return make_error(ErrorCode::invalid_argument,
                        who + "episodes.bootstrap_fields: no field named '" + name + "'");
    }
    if (config.schema.field(static_cast<std::size_t>(found)).is_frame()) {
      return make_error(ErrorCode::invalid_argument,
                        who + "episodes.bootstrap_fields: '" + name +
                            "' is a frame field (stack, next_of or compression); its next value "
                            "comes with next_of");
    }
  }
  if (config.max_compressed_bytes != 0 && !config.schema.has_compression()) {
    return make_error(ErrorCode::invalid_argument,
                      who + "max_compressed_bytes: the table has no compressed field");
  }
  for (const auto& field : config.schema.fields()) {
    if (field.next_of && config.schema.find("next_" + field.name) >= 0) {
      return make_error(ErrorCode::invalid_argument, who + "field '" + field.name +
                                                         "' is next_of, so samples name its next "
                                                         "value 'next_" +
                                                         field.name +
                                                         "'; a field of that name exists already");
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

namespace {

std::string decimal_text(uint128 value) {
  if (value <= UINT64_MAX) return std::to_string(static_cast<std::uint64_t>(value));
  return "more than " + std::to_string(UINT64_MAX);
}

}  // namespace

std::uint64_t compressed_budget(const TableConfig& config) {
  if (config.max_compressed_bytes != 0) return config.max_compressed_bytes;
  uint128 bytes = 0;
  for (const auto& field : config.schema.fields())
    if (field.compression != Compression::none)
      bytes += static_cast<uint128>(config.capacity) *
               BlobColumn::cost(max_zstd_frame_bytes(field.item_bytes()));
  return bytes > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(bytes);
}

namespace {

uint128 round_up_to_page(uint128 bytes) {
  const uint128 page = StorageLayout::kAlignment;
  return (bytes + page - 1) / page * page;
}

}  // namespace

TableBytes table_bytes(const TableConfig& config) {
  TableBytes bytes;
  // The stamps and uncompressed columns, page-aligned, in one block (storage_layout.h).
  // uint128 first: validate_table_config calls this before it knows the sizes fit 64 bits.
  const uint128 stamps = static_cast<uint128>(config.capacity) * sizeof(std::uint64_t);
  bytes.data += round_up_to_page(stamps);
  // A file tier keeps at most its RAM budget and the rows being written out hot (the cells
  // of cold rows are given back); its per-slot state and its queue of hot rows beside.
  const uint128 resident_rows =
      config.file_tier.enabled()
          ? std::min<uint128>(config.capacity, file_tier_ram_rows(config) + kFileTierSlackRows)
          : config.capacity;
  if (config.file_tier.enabled()) {
    // The queue of hot rows holds at most two entries per hot row and some slack.
    bytes.data += static_cast<uint128>(config.capacity) * kFileTierBytesPerSlot +
                  (resident_rows * 2 + TierIndex::kHotOrderSlack) * sizeof(SpillRow);
  }
  const std::vector<std::uint64_t> written_out =
      config.file_tier.enabled() ? file_tier_field_bytes(config) : std::vector<std::uint64_t>();
  for (std::size_t f = 0; f < config.schema.size(); ++f) {
    const Field& field = config.schema.field(f);
    if (field.compression == Compression::none) {
      // A field a file tier leaves in RAM (an episodic table's reward) keeps every row.
      const uint128 rows =
          written_out.empty() || written_out[f] != 0 ? resident_rows : uint128{config.capacity};
      bytes.data += round_up_to_page(rows * field.item_bytes());
    } else {
      bytes.data += static_cast<uint128>(config.capacity) * BlobColumn::kIndexBytesPerSlot;
    }
  }
  if (config.schema.has_compression()) bytes.data += compressed_budget(config);
  bytes.metadata = std::uint64_t{config.capacity} * Storage::kMetadataBytesPerSlot;
  bytes.replay = std::uint64_t{config.capacity} * ReplayStats::kBytesPerSlot;
  bytes.sampler = selector_bytes(config.sampler.kind, config.capacity);
  bytes.remover = selector_bytes(config.remover, config.capacity);
  bytes.versions = selector_bytes(config.sampler.kind, config.capacity);
  if (config.episodes.enabled) {
    const std::uint64_t per_index = selector_bytes(config.sampler.kind, config.capacity) +
                                    config.capacity;  // + membership bytes
    const std::uint64_t complete =
        selector_bytes(SelectorKind::prioritized, config.capacity) + config.capacity;
    bytes.episodes = std::uint64_t{config.capacity} * (kEpisodeBytesPerSlot + kEpisodeMemoryBytes) +
                     kMaxOpenEpisodesPerTable * kEpisodeMemoryBytes + complete +
                     kMaxWindowIndexes * per_index;
  }
  return bytes;
}

std::uint64_t fixed_row_bytes(const Schema& schema) {
  std::uint64_t bytes = 0;
  for (const auto& field : schema.fields())
    if (field.compression == Compression::none) bytes += field.item_bytes();
  return bytes;
}

std::vector<std::uint64_t> file_tier_field_bytes(const TableConfig& config) {
  std::vector<std::uint64_t> bytes;
  for (const auto& field : config.schema.fields()) {
    const bool stays = field.compression != Compression::none || field.is_frame() ||
                       (config.episodes.enabled && field.name == config.episodes.reward_field);
    bytes.push_back(stays ? 0 : field.item_bytes());
  }
  return bytes;
}

std::uint64_t file_tier_row_bytes(const TableConfig& config) {
  std::uint64_t total = 0;
  for (std::uint64_t bytes : file_tier_field_bytes(config))
    total += bytes;
  return total;
}

std::uint64_t file_tier_ram_rows(const TableConfig& config) {
  const std::uint64_t row = fixed_row_bytes(config.schema);
  return std::max<std::uint64_t>(1, row == 0 ? config.capacity : config.file_tier.ram_bytes / row);
}

std::string not_a_value_name() {
  return "is not a value name (" + std::string(kValueNameRule) + ")";
}

bool is_valid_value_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-' || c == '/';
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
  const TableBytes bytes = table_bytes(config);
  if (bytes.total() > max_table_bytes) {
    return make_error(
        ErrorCode::resource_exhausted,
        who + "capacity " + std::to_string(config.capacity) + " needs " +
            decimal_text(bytes.total()) + " bytes (data " + decimal_text(bytes.data) + " = " +
            std::to_string(config.schema.item_bytes()) + " bytes per item, slot metadata " +
            std::to_string(bytes.metadata) + ", sampler " + std::to_string(bytes.sampler) +
            ", remover " + std::to_string(bytes.remover) + ", episodes " +
            std::to_string(bytes.episodes) + ", replay stats " + std::to_string(bytes.replay) +
            ", version-bounded sampler " + std::to_string(bytes.versions) +
            "), exceeding max_table_bytes = " + std::to_string(max_table_bytes) +
            " bytes per table" +
            (config.schema.has_compression() && config.max_compressed_bytes == 0
                 ? "; its compressed values are budgeted " +
                       std::to_string(compressed_budget(config)) +
                       " bytes by default (capacity x the largest frame accepted): set "
                       "max_compressed_bytes to what they will take"
                 : std::string()) +
            (config.file_tier.enabled()
                 ? std::string()
                 : "; or give it a file tier (file_tier.ram_bytes: only that many bytes of "
                   "rows in RAM)"));
  }
  if (config.file_tier.enabled() && file_tier_row_bytes(config) == 0) {
    return make_error(ErrorCode::invalid_argument,
                      who +
                          "file_tier: the table has no field to write out (compressed values "
                          "and an episodic table's reward field stay in RAM); leave "
                          "file_tier out");
  }
  if (config.rate_limiter.min_size_to_sample > static_cast<std::int64_t>(config.capacity)) {
    return make_error(ErrorCode::invalid_argument,
                      who + "rate_limiter.min_size_to_sample (" +
                          std::to_string(config.rate_limiter.min_size_to_sample) +
                          ") exceeds capacity (" + std::to_string(config.capacity) +
                          "): sampling could never start");
  }
  if (!config.versions.value.empty() && !is_valid_value_name(config.versions.value)) {
    return make_error(ErrorCode::invalid_argument,
                      who +
                          "versions.value must name a published value: 1-128 characters of "
                          "letters, digits, '_', '.', '-' and '/'");
  }
  if (config.versions.drop_behind && config.versions.value.empty()) {
    return make_error(ErrorCode::invalid_argument,
                      who +
                          "versions.drop_behind needs versions.value: the published value "
                          "whose versions the items are dropped behind");
  }
  if (config.episodes.enabled) return validate_episode_config(config);
  for (const auto& field : config.schema.fields()) {
    if (field.is_frame()) {
      return make_error(ErrorCode::invalid_argument,
                        who + "field '" + field.name +
                            "': stack, next_of and compression need an episodic table");
    }
  }
  if (config.max_compressed_bytes != 0) {
    return make_error(ErrorCode::invalid_argument,
                      who + "max_compressed_bytes: the table has no compressed field");
  }
  return Ok{};
}

}  // namespace replayd
