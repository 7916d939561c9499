#include "core/snapshot/table_snapshot.h"

#include <limits>

#include "core/table/episodic_table.h"

#include <cmath>
#include <cstring>
#include <optional>

#include "core/snapshot/episode_snapshot.h"
#include "core/storage/zstd_value.h"

namespace replayd {
namespace {

constexpr std::uint32_t kTableConfig = section_tag("TCFG");
constexpr std::uint32_t kTableState = section_tag("TSTA");
constexpr std::uint32_t kGenerations = section_tag("TGEN");
constexpr std::uint32_t kFreeSlots = section_tag("TFRE");
constexpr std::uint32_t kItems = section_tag("TITM");
constexpr std::uint32_t kSamplerOrder = section_tag("TSAM");
constexpr std::uint32_t kBlobs = section_tag("TBLB");
constexpr std::uint32_t kLostCount = section_tag("TLSN");     // version 2
constexpr std::uint32_t kLostKeys = section_tag("TLSK");      // version 2
constexpr std::uint32_t kMetadata = section_tag("TMET");      // version 3
constexpr std::uint32_t kVersionsHead = section_tag("TVRH");  // version 5
constexpr std::uint32_t kVersions = section_tag("TVRS");      // version 5
constexpr std::uint32_t kTierHead = section_tag("TTRH");      // version 6
constexpr std::uint32_t kTierCold = section_tag("TTRC");      // version 6
// Bytes of one cold row in TTRC: slot, segment, bytes | raw << 31 (u32 each), offset (u64).
constexpr std::uint64_t kColdEntryBytes = 20;
constexpr std::uint8_t kFrameOptionsTail = 2;
constexpr std::uint8_t kNoHistoryPaddingTail = 3;  // EpisodeConfig::pad_history = false

// Codes in the file, by position: independent of the enums' order in the code.
constexpr DType kDTypes[] = {DType::boolean, DType::int8,    DType::int16,   DType::int32,
                             DType::int64,   DType::uint8,   DType::uint16,  DType::uint32,
                             DType::uint64,  DType::float16, DType::float32, DType::float64};
constexpr SelectorKind kSelectorKinds[] = {SelectorKind::uniform,  SelectorKind::prioritized,
                                           SelectorKind::fifo,     SelectorKind::lifo,
                                           SelectorKind::max_heap, SelectorKind::min_heap};

template <typename T, std::size_t N>
std::uint8_t code_of(const T (&codes)[N], T value) {
  for (std::size_t i = 0; i < N; ++i) {
    if (codes[i] == value) return static_cast<std::uint8_t>(i);
  }
  return 0xff;
}

// Bytes per item row in the items stream: key, priority, times sampled, then the fields
// (a compressed field: its value's size, the value itself in the blob stream).
constexpr std::uint64_t kRowHeaderBytes = 8 + 8 + 4;
std::uint64_t row_bytes(const Schema& schema) {
  std::uint64_t bytes = kRowHeaderBytes;
  for (const auto& field : schema.fields())
    bytes += field.compression != Compression::none ? 4 : field.item_bytes();
  return bytes;
}

Error bad(const std::string& what) {
  return make_error(ErrorCode::invalid_argument, what);
}

Error in_table(const std::string& table, const Error& error) {
  return make_error(error.code, "table '" + table + "': " + error.message);
}

}  // namespace

// The one place that reads and rebuilds Table's private state (friend of Table).
class TableSnapshotAccess {
 public:
  static Status write(const Table& table, SectionWriter& writer, std::uint64_t* items_lost);
  static Result<std::unique_ptr<Table>> read(SectionReader& reader, std::uint64_t max_table_bytes,
                                             std::uint32_t version, ColumnMemorySource* memory,
                                             std::uint64_t* items_written);

 private:
  static Result<TableConfig> read_config(std::span<const std::byte> payload);
  static Status read_slots(SectionReader& reader, Table& table, std::uint32_t size,
                           std::vector<bool>& occupied);
  // `cold`: a file tier's cold rows by slot (empty without one); their cells are not in
  // TITM.
  static Status read_items(SectionReader& reader, Table& table, const std::vector<bool>& occupied,
                           const std::vector<std::optional<ColdLocation>>& cold);
  static Status write_lost(SectionWriter& writer, std::span<const std::uint64_t> lost);
  // Reads the lost keys and removes their items. Returns how many.
  static Result<std::uint64_t> drop_lost(SectionReader& reader, Table& table);
  static Status write_versions(const Table& table, SectionWriter& writer);
  static Status write_tier(const Table& table, SectionWriter& writer);
  // Reads TTRC: the cold rows of a table with a file tier, by slot (nullopt: hot or free).
  static Result<std::vector<std::optional<ColdLocation>>> read_cold_rows(SectionReader& reader,
                                                                         std::uint32_t capacity,
                                                                         std::uint64_t count);
  static Status read_versions(SectionReader& reader, Table& table);
  // Counts every stored item's version in the table's VersionIndex afresh.
  static void recount_versions(Table& table);
  static Status read_sampler_order(SectionReader& reader, Table& table,
                                   const std::vector<bool>& occupied);
};

Status TableSnapshotAccess::write(const Table& table, SectionWriter& writer,
                                  std::uint64_t* items_lost) {
  const TableConfig& config = table.config_;
  ByteWriter cfg;
  cfg.str(config.name);
  cfg.u32(config.capacity);
  cfg.u32(static_cast<std::uint32_t>(config.schema.size()));
  for (const Field& field : config.schema.fields()) {
    cfg.str(field.name);
    cfg.u8(code_of(kDTypes, field.dtype));
    cfg.u8(static_cast<std::uint8_t>(field.shape.size()));
    for (auto dim : field.shape)
      cfg.u64(dim);
  }
  cfg.u8(code_of(kSelectorKinds, config.sampler.kind));
  cfg.f64(config.sampler.priority_exponent);
  cfg.u8(code_of(kSelectorKinds, config.remover));
  cfg.u32(config.max_times_sampled);
  cfg.f64(config.rate_limiter.samples_per_insert);
  cfg.u64(static_cast<std::uint64_t>(config.rate_limiter.min_size_to_sample));
  cfg.f64(config.rate_limiter.min_diff);
  cfg.f64(config.rate_limiter.max_diff);
  cfg.u64(config.seed);
  if (config.episodes.enabled) {  // absent in tables that are not episodic (and in old files)
    cfg.u8(1);
    cfg.str(config.episodes.reward_field);
    cfg.u32(static_cast<std::uint32_t>(config.episodes.bootstrap_fields.size()));
    for (const auto& name : config.episodes.bootstrap_fields)
      cfg.str(name);
    if (config.schema.has_frames()) {  // absent in tables without frame fields
      cfg.u8(kFrameOptionsTail);
      for (const Field& field : config.schema.fields()) {
        cfg.u32(field.stack);
        cfg.u8(field.next_of ? 1 : 0);
        cfg.u8(static_cast<std::uint8_t>(field.compression));
        cfg.u8(static_cast<std::uint8_t>(field.compression_level));
      }
      cfg.u64(config.max_compressed_bytes);
    }
    if (!config.episodes.pad_history) cfg.u8(kNoHistoryPaddingTail);  // absent: padded
  }
  REPLAYD_RETURN_IF_ERROR(writer.section(kTableConfig, cfg.data()));
  REPLAYD_RETURN_IF_ERROR(write_tier(table, writer));

  const Storage& storage = table.storage_;
  ByteWriter state;
  state.u32(storage.size());
  state.u32(0);
  const TableCounters& c = table.counters_;
  for (auto value : {c.inserts, c.samples, c.priority_updates, c.stale_updates, c.deletes,
                     c.stale_deletes, c.evictions, c.expirations}) {
    state.u64(value);
  }
  const RateLimiterCounters& limiter = table.rate_limiter_.counters();
  for (auto value : {limiter.inserts, limiter.samples, limiter.deletes})
    state.u64(value);
  for (auto word : table.rng_.state())
    state.u64(word);
  state.f64(table.max_priority_);
  REPLAYD_RETURN_IF_ERROR(writer.section(kTableState, state.data()));

  writer.begin_stream(kGenerations);
  for (std::uint32_t slot = 0; slot < storage.capacity(); ++slot) {
    REPLAYD_RETURN_IF_ERROR(writer.append_value(storage.generation(slot)));
  }
  REPLAYD_RETURN_IF_ERROR(writer.end_stream());

  writer.begin_stream(kFreeSlots);
  REPLAYD_RETURN_IF_ERROR(writer.append(std::as_bytes(storage.free_slots())));
  REPLAYD_RETURN_IF_ERROR(writer.end_stream());

  // Items in the remover's order, so that eviction order survives.
  writer.begin_stream(kItems);
  Status status = Ok{};
  std::vector<std::uint64_t> lost;  // items whose bytes changed under the copy
  const TierIndex* tier = table.tier_.get();
  table.remover_->for_each_in_order([&](std::uint32_t slot) {
    if (!status) return;
    status = writer.append_value(storage.key(slot));
    if (status) status = writer.append_value(storage.priority(slot));
    if (status) status = writer.append_value(storage.times_sampled(slot));
    // A cold row's written-out fields are in its segment (TTRC says where), their cells
    // given back; the fields a file tier leaves in RAM are here as a hot row's.
    const bool cold = tier != nullptr && tier->cold(slot);
    for (std::size_t f = 0; status && f < config.schema.size(); ++f) {
      if (const BlobColumn* blobs = storage.blobs(f)) {
        status = writer.append_value(static_cast<std::uint32_t>(blobs->get(slot).size()));
      } else if (!cold || table.tier_field_bytes_[f] == 0) {
        status = writer.append({storage.cell(f, slot), storage.item_bytes(f)});
      }
    }
    if (status && !cold && !storage.stamp_holds_key(slot)) lost.push_back(storage.key(slot));
  });
  REPLAYD_RETURN_IF_ERROR(status);
  REPLAYD_RETURN_IF_ERROR(writer.end_stream());

  if (config.schema.has_compression()) {  // the compressed values, in the items' order
    writer.begin_stream(kBlobs);
    table.remover_->for_each_in_order([&](std::uint32_t slot) {
      for (std::size_t f = 0; status && f < config.schema.size(); ++f) {
        if (const BlobColumn* blobs = storage.blobs(f)) status = writer.append(blobs->get(slot));
      }
    });
    REPLAYD_RETURN_IF_ERROR(status);
    REPLAYD_RETURN_IF_ERROR(writer.end_stream());
  }

  writer.begin_stream(kSamplerOrder);
  table.sampler_->for_each_in_order([&](std::uint32_t slot) {
    if (status) status = writer.append_value(slot);
  });
  REPLAYD_RETURN_IF_ERROR(status);
  REPLAYD_RETURN_IF_ERROR(writer.end_stream());
  if (const EpisodicTable* episodic = table.episodic_.get()) {
    REPLAYD_RETURN_IF_ERROR(write_episode_sections(*episodic->episodes_, *episodic->step_log_,
                                                   *episodic->windows_, writer));
  }
  if (items_lost) *items_lost = lost.size();
  REPLAYD_RETURN_IF_ERROR(write_lost(writer, lost));
  ByteWriter metadata;
  metadata.str(config.metadata);
  REPLAYD_RETURN_IF_ERROR(writer.section(kMetadata, metadata.data()));
  return write_versions(table, writer);
}

// TTRH: the file tier's RAM budget (0: none) and, with one, how many rows are cold; TTRC (a
// stream, with a file tier only): each cold row's slot and record location, in slot order.
// The segment files themselves are kept beside the image by the service (hard links).
Status TableSnapshotAccess::write_tier(const Table& table, SectionWriter& writer) {
  const TierIndex* tier = table.tier_.get();
  ByteWriter head;
  head.u64(tier ? table.config_.file_tier.ram_bytes : 0);
  if (tier) head.u64(tier->cold_rows());
  REPLAYD_RETURN_IF_ERROR(writer.section(kTierHead, head.data()));
  if (!tier) return Ok{};
  writer.begin_stream(kTierCold);
  Status status = Ok{};
  for (std::uint32_t slot = 0; status && slot < table.storage_.capacity(); ++slot) {
    if (!tier->cold(slot)) continue;
    const ColdLocation& where = tier->location(slot);
    status = writer.append_value(slot);
    if (status) status = writer.append_value(where.segment);
    if (status)
      status = writer.append_value(std::uint32_t{where.bytes} | std::uint32_t{where.raw} << 31);
    if (status) status = writer.append_value(where.offset);
  }
  REPLAYD_RETURN_IF_ERROR(status);
  return writer.end_stream();
}

Result<std::vector<std::optional<ColdLocation>>> TableSnapshotAccess::read_cold_rows(
    SectionReader& reader, std::uint32_t capacity, std::uint64_t count) {
  if (count > capacity) {
    return bad("section TTRH: " + std::to_string(count) + " cold rows, more than the capacity " +
               std::to_string(capacity));
  }
  std::vector<std::optional<ColdLocation>> cold(capacity);
  reader.begin_stream(kTierCold, count * kColdEntryBytes);
  std::int64_t previous = -1;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint32_t slot = 0;
    std::uint32_t segment = 0;
    std::uint32_t bytes_raw = 0;
    std::uint64_t offset = 0;
    REPLAYD_RETURN_IF_ERROR(reader.read_value(slot));
    REPLAYD_RETURN_IF_ERROR(reader.read_value(segment));
    REPLAYD_RETURN_IF_ERROR(reader.read_value(bytes_raw));
    REPLAYD_RETURN_IF_ERROR(reader.read_value(offset));
    if (slot >= capacity || std::int64_t{slot} <= previous) {
      return bad("section TTRC: cold row " + std::to_string(i) + ": slot " + std::to_string(slot) +
                 " is out of range or out of order");
    }
    ColdLocation where;
    where.segment = segment;
    where.bytes = bytes_raw & 0x7fffffffu;
    where.raw = bytes_raw >> 31;
    where.offset = offset;
    if (where.bytes == 0 || offset > (std::uint64_t{1} << 48)) {
      return bad("section TTRC: cold row in slot " + std::to_string(slot) +
                 ": record of 0 bytes, or at an offset past 2^48");
    }
    cold[slot] = where;
    previous = slot;
  }
  REPLAYD_RETURN_IF_ERROR(reader.end_stream());
  return cold;
}

// TVRH: the followed value's name, whether drop_behind is set and its value, the
// version_drops counter, and how many versions TVRS holds: 0 when every stored item's
// version is 0, else one per slot of capacity (free slots' 0), in slot order.
Status TableSnapshotAccess::write_versions(const Table& table, SectionWriter& writer) {
  const VersionsConfig& config = table.config_.versions;
  const Storage& storage = table.storage_;
  const auto newest = table.versions_.max_version();
  const bool any = newest && *newest != 0;
  ByteWriter head;
  head.str(config.value);
  head.u8(config.drop_behind ? 1 : 0);
  head.u64(config.drop_behind.value_or(0));
  head.u64(table.counters_.version_drops);
  head.u64(any ? storage.capacity() : 0);
  REPLAYD_RETURN_IF_ERROR(writer.section(kVersionsHead, head.data()));
  if (!any) return Ok{};
  writer.begin_stream(kVersions);
  Status status = Ok{};
  for (std::uint32_t slot = 0; status && slot < storage.capacity(); ++slot) {
    status = writer.append_value(storage.occupied(slot) ? storage.version(slot) : 0);
  }
  REPLAYD_RETURN_IF_ERROR(status);
  return writer.end_stream();
}

Status TableSnapshotAccess::read_versions(SectionReader& reader, Table& table) {
  REPLAYD_ASSIGN_OR_RETURN(auto head_bytes, reader.section(kVersionsHead));
  ByteReader in(head_bytes);
  VersionsConfig config;
  std::uint8_t has_drop_behind = 0;
  std::uint64_t drop_behind = 0;
  std::uint64_t drops = 0;
  std::uint64_t count = 0;
  if (!in.str(config.value, 128) || !in.u8(has_drop_behind) || !in.u64(drop_behind) ||
      !in.u64(drops) || !in.u64(count) || in.remaining() != 0 || has_drop_behind > 1) {
    return bad("section TVRH: malformed");
  }
  if (has_drop_behind) config.drop_behind = drop_behind;
  TableConfig checked = table.config_;
  checked.versions = config;
  if (auto valid = validate_table_config(checked, std::numeric_limits<std::uint64_t>::max());
      !valid) {
    return bad("section TVRH: " + valid.error().message);
  }
  Storage& storage = table.storage_;
  if (count != 0 && count != storage.capacity()) {
    return bad("section TVRH: " + std::to_string(count) + " versions, the table has " +
               std::to_string(storage.capacity()) + " slots");
  }
  table.config_.versions = config;
  table.counters_.version_drops = drops;
  if (count == 0) return Ok{};
  reader.begin_stream(kVersions, count * 8);
  for (std::uint32_t slot = 0; slot < storage.capacity(); ++slot) {
    std::uint64_t version = 0;
    REPLAYD_RETURN_IF_ERROR(reader.read_value(version));
    if (storage.occupied(slot)) {
      storage.set_version(slot, version);
    } else if (version != 0) {
      return bad("section TVRS: free slot " + std::to_string(slot) + " has a version");
    }
  }
  REPLAYD_RETURN_IF_ERROR(reader.end_stream());
  recount_versions(table);
  return Ok{};
}

void TableSnapshotAccess::recount_versions(Table& table) {
  table.versions_.clear();
  table.versions_.drop_eligible();
  const Storage& storage = table.storage_;
  for (std::uint32_t slot = 0; slot < storage.capacity(); ++slot) {
    if (storage.occupied(slot)) table.versions_.count(storage.version(slot));
  }
}

Status TableSnapshotAccess::write_lost(SectionWriter& writer, std::span<const std::uint64_t> lost) {
  ByteWriter count;
  count.u64(lost.size());
  REPLAYD_RETURN_IF_ERROR(writer.section(kLostCount, count.data()));
  writer.begin_stream(kLostKeys);
  REPLAYD_RETURN_IF_ERROR(writer.append(std::as_bytes(lost)));
  return writer.end_stream();
}

Result<std::uint64_t> TableSnapshotAccess::drop_lost(SectionReader& reader, Table& table) {
  REPLAYD_ASSIGN_OR_RETURN(auto count_bytes, reader.section(kLostCount));
  ByteReader in(count_bytes);
  std::uint64_t count = 0;
  if (!in.u64(count) || in.remaining() != 0) return bad("section TLSN: malformed");
  if (count > table.size()) {
    return bad("section TLSN: " + std::to_string(count) + " lost items, more than the " +
               std::to_string(table.size()) + " stored");
  }
  reader.begin_stream(kLostKeys, count * 8);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t key = 0;
    REPLAYD_RETURN_IF_ERROR(reader.read_value(key));
    const auto slot = table.storage_.find(key);
    if (!slot) {
      return bad("section TLSK: lost key " + std::to_string(key) +
                 " is not a stored item, or is listed twice");
    }
    table.remove_item(*slot);
    ++table.counters_.evictions;
  }
  REPLAYD_RETURN_IF_ERROR(reader.end_stream());
  return count;
}

Result<TableConfig> TableSnapshotAccess::read_config(std::span<const std::byte> payload) {
  ByteReader in(payload);
  const auto truncated = [] { return bad("section TCFG: configuration is cut short"); };
  TableConfig config;
  std::uint32_t field_count = 0;
  if (!in.str(config.name, Schema::kMaxNameChars) || !in.u32(config.capacity) ||
      !in.u32(field_count)) {
    return truncated();
  }
  if (field_count > Schema::kMaxFields) {
    return bad("section TCFG: " + std::to_string(field_count) + " fields, more than the limit of " +
               std::to_string(Schema::kMaxFields));
  }
  std::vector<Field> fields(field_count);
  for (Field& field : fields) {
    std::uint8_t dtype = 0;
    std::uint8_t dims = 0;
    if (!in.str(field.name, Schema::kMaxNameChars) || !in.u8(dtype) || !in.u8(dims)) {
      return truncated();
    }
    if (dtype >= std::size(kDTypes))
      return bad("section TCFG: unknown dtype code " + std::to_string(dtype));
    if (dims > Schema::kMaxDims)
      return bad("section TCFG: field with " + std::to_string(dims) + " dimensions");
    field.dtype = kDTypes[dtype];
    field.shape.resize(dims);
    for (auto& dim : field.shape) {
      if (!in.u64(dim)) return truncated();
    }
  }
  std::uint8_t sampler = 0;
  std::uint8_t remover = 0;
  std::uint64_t min_size = 0;
  if (!in.u8(sampler) || !in.f64(config.sampler.priority_exponent) || !in.u8(remover) ||
      !in.u32(config.max_times_sampled) || !in.f64(config.rate_limiter.samples_per_insert) ||
      !in.u64(min_size) || !in.f64(config.rate_limiter.min_diff) ||
      !in.f64(config.rate_limiter.max_diff) || !in.u64(config.seed)) {
    return truncated();
  }
  if (sampler >= std::size(kSelectorKinds) || remover >= std::size(kSelectorKinds)) {
    return bad("section TCFG: unknown selector code");
  }
  if (min_size > (std::uint64_t{1} << 40))
    return bad("section TCFG: min_size_to_sample out of range");
  if (in.remaining() != 0) {  // the episodic tail
    std::uint8_t episodic = 0;
    std::uint32_t bootstrap_count = 0;
    config.episodes.bootstrap_fields.clear();
    if (!in.u8(episodic) || episodic != 1 ||
        !in.str(config.episodes.reward_field, Schema::kMaxNameChars) || !in.u32(bootstrap_count) ||
        bootstrap_count > Schema::kMaxFields) {
      return bad("section TCFG: unexpected bytes after the configuration");
    }
    config.episodes.enabled = true;
    config.episodes.bootstrap_fields.resize(bootstrap_count);
    for (auto& name : config.episodes.bootstrap_fields) {
      if (!in.str(name, Schema::kMaxNameChars)) return truncated();
    }
    // Optional tails, each a marker byte and its data, in this order; 0 = none (left).
    std::uint8_t tail = 0;
    const auto next_tail = [&in, &tail] {
      return in.remaining() == 0 || (in.u8(tail) && tail != 0);
    };
    if (!next_tail()) return bad("section TCFG: unexpected bytes after the configuration");
    if (tail == kFrameOptionsTail) {
      for (Field& field : fields) {
        std::uint8_t next_of = 0;
        std::uint8_t compression = 0;
        std::uint8_t level = 0;
        if (!in.u32(field.stack) || !in.u8(next_of) || !in.u8(compression) || !in.u8(level))
          return truncated();
        if (next_of > 1 || compression > 1)
          return bad("section TCFG: unknown frame option of field '" + field.name + "'");
        field.next_of = next_of == 1;
        field.compression = static_cast<Compression>(compression);
        field.compression_level = level;
      }
      if (!in.u64(config.max_compressed_bytes)) return truncated();
      tail = 0;
      if (!next_tail()) return bad("section TCFG: unexpected bytes after the configuration");
    }
    if (tail == kNoHistoryPaddingTail) {
      config.episodes.pad_history = false;
      tail = 0;
    }
    if (tail != 0 || in.remaining() != 0)
      return bad("section TCFG: unexpected bytes after the configuration");
  }
  auto schema = Schema::create(std::move(fields));
  if (!schema) return bad("section TCFG: " + schema.error().message);
  config.schema = std::move(schema).value();
  config.sampler.kind = kSelectorKinds[sampler];
  config.remover = kSelectorKinds[remover];
  config.rate_limiter.min_size_to_sample = static_cast<std::int64_t>(min_size);
  return config;
}

// Key generations and the free-slot stack; afterwards `occupied` tells the stored slots.
Status TableSnapshotAccess::read_slots(SectionReader& reader, Table& table, std::uint32_t size,
                                       std::vector<bool>& occupied) {
  Storage& storage = table.storage_;
  const std::uint32_t capacity = storage.capacity();
  occupied.assign(capacity, true);
  const std::uint64_t max_generation = ~std::uint64_t{0} >> storage.slot_bits();
  reader.begin_stream(kGenerations, std::uint64_t{capacity} * 8);
  for (std::uint32_t slot = 0; slot < capacity; ++slot) {
    std::uint64_t generation = 0;
    REPLAYD_RETURN_IF_ERROR(reader.read_value(generation));
    if (generation > max_generation) {
      return bad("slot " + std::to_string(slot) + ": key generation " + std::to_string(generation) +
                 " does not fit a key");
    }
    storage.set_generation(slot, generation);
  }
  REPLAYD_RETURN_IF_ERROR(reader.end_stream());

  std::vector<std::uint32_t> free_stack(capacity - size);
  reader.begin_stream(kFreeSlots, std::uint64_t{capacity - size} * 4);
  REPLAYD_RETURN_IF_ERROR(reader.read(std::as_writable_bytes(std::span(free_stack))));
  REPLAYD_RETURN_IF_ERROR(reader.end_stream());
  for (auto slot : free_stack) {
    if (slot >= capacity || !occupied[slot]) {
      return bad("free slot " + std::to_string(slot) + " is out of range or listed twice");
    }
    occupied[slot] = false;
  }
  for (std::uint32_t slot = 0; slot < capacity; ++slot) {
    if (occupied[slot] && storage.generation(slot) == 0) {
      return bad("occupied slot " + std::to_string(slot) + " was never acquired (generation 0)");
    }
  }
  storage.restore_layout(free_stack);
  return Ok{};
}

Status TableSnapshotAccess::read_items(SectionReader& reader, Table& table,
                                       const std::vector<bool>& occupied,
                                       const std::vector<std::optional<ColdLocation>>& cold) {
  Storage& storage = table.storage_;
  const TableConfig& config = table.config_;
  const std::uint32_t size = storage.size();
  const std::uint64_t mask = (std::uint64_t{1} << storage.slot_bits()) - 1;
  std::uint64_t cold_rows = 0;  // their written-out fields are in their records, not here
  for (const auto& where : cold)
    cold_rows += where ? 1 : 0;
  reader.begin_stream(kItems,
                      std::uint64_t{size} * row_bytes(config.schema) -
                          std::min<std::uint64_t>(cold_rows, size) * file_tier_row_bytes(config));
  // (slot, field, size) of each compressed value, in the blob stream's order.
  struct PendingBlob {
    std::uint32_t slot;
    std::uint32_t field;
    std::uint32_t size;
  };
  std::vector<PendingBlob> blobs;
  std::uint64_t blob_total = 0;
  std::vector<bool> seen(storage.capacity(), false);
  table.draws_left_ = 0;
  for (std::uint32_t i = 0; i < size; ++i) {
    std::uint64_t key = 0;
    double priority = 0;
    std::uint32_t times_sampled = 0;
    REPLAYD_RETURN_IF_ERROR(reader.read_value(key));
    REPLAYD_RETURN_IF_ERROR(reader.read_value(priority));
    REPLAYD_RETURN_IF_ERROR(reader.read_value(times_sampled));
    const std::uint64_t slot = key & mask;
    if (slot >= storage.capacity() || !occupied[slot] || seen[slot] || storage.key(slot) != key) {
      return bad("item " + std::to_string(i) + ": key " + std::to_string(key) +
                 " does not match an occupied slot, or is listed twice");
    }
    if (!std::isfinite(priority) || priority < 0) {
      return bad("item " + std::to_string(i) + ": priority " + std::to_string(priority) +
                 " is not finite and >= 0");
    }
    if (auto status = table.sampler_->check_priority(priority); !status) {
      return bad("item " + std::to_string(i) + ": " + status.error().message);
    }
    if (auto status = table.remover_->check_priority(priority); !status) {
      return bad("item " + std::to_string(i) + ": remover: " + status.error().message);
    }
    // An episodic table keeps a step whose start retired (sampled max_times_sampled times).
    const std::uint64_t limit = config.max_times_sampled + (table.episodic_ ? 1 : 0);
    if (config.max_times_sampled != 0 && times_sampled >= limit) {
      return bad("item " + std::to_string(i) + ": sampled " + std::to_string(times_sampled) +
                 " times, but max_times_sampled is " + std::to_string(config.max_times_sampled));
    }
    const auto s = static_cast<std::uint32_t>(slot);
    seen[s] = true;
    const bool is_cold = !cold.empty() && cold[s].has_value();
    for (std::size_t f = 0; f < config.schema.size(); ++f) {
      if (storage.blobs(f) != nullptr) {
        std::uint32_t blob_size = 0;
        REPLAYD_RETURN_IF_ERROR(reader.read_value(blob_size));
        blob_total += blob_size;
        blobs.push_back({s, static_cast<std::uint32_t>(f), blob_size});
        continue;
      }
      if (!is_cold || table.tier_field_bytes_[f] == 0)
        REPLAYD_RETURN_IF_ERROR(reader.read({storage.cell(f, s), storage.item_bytes(f)}));
    }
    // Items come in the remover's order (fifo's: as stored): the hot ones go cold in that
    // order again.
    if (TierIndex* tier = table.tier_.get()) {
      if (is_cold) {
        tier->restore_cold(s, *cold[s]);
      } else {
        tier->on_store(s, key);
      }
    }
    storage.set_priority(s, priority);
    storage.set_times_sampled(s, times_sampled);
    table.remover_->insert(s, priority);
    if (config.max_times_sampled != 0 && !table.episodic_)
      table.draws_left_ += config.max_times_sampled - times_sampled;
  }
  REPLAYD_RETURN_IF_ERROR(reader.end_stream());
  for (std::uint32_t slot = 0; slot < cold.size(); ++slot) {
    if (cold[slot] && !seen[slot])
      return bad("section TTRC: cold row in slot " + std::to_string(slot) +
                 ", which holds no item");
  }
  if (!config.schema.has_compression()) return Ok{};
  // Every value is checked as an append checks it, and together they keep to the budget.
  const std::uint64_t budget = compressed_budget(config);
  if (blob_total > budget) {
    return bad("compressed values take " + std::to_string(blob_total) +
               " bytes, more than max_compressed_bytes " + std::to_string(budget));
  }
  reader.begin_stream(kBlobs, blob_total);
  std::vector<std::byte> value;
  for (const PendingBlob& blob : blobs) {
    value.resize(blob.size);
    REPLAYD_RETURN_IF_ERROR(reader.read(value));
    const Field& field = config.schema.field(blob.field);
    if (blob.size != 0) {  // 0: no value (a final observation's fields that are not next_of)
      if (auto status = check_zstd_frame(value, field.item_bytes()); !status) {
        return bad("compressed value of field '" + field.name + "' in slot " +
                   std::to_string(blob.slot) + ": " + status.error().message);
      }
    }
    storage.blobs(blob.field)->set(blob.slot, value);
  }
  if (storage.blob_bytes() > budget) {
    return bad("compressed values exceed max_compressed_bytes " + std::to_string(budget));
  }
  return reader.end_stream();
}

Status TableSnapshotAccess::read_sampler_order(SectionReader& reader, Table& table,
                                               const std::vector<bool>& occupied) {
  Storage& storage = table.storage_;
  const std::uint32_t size = storage.size();
  reader.begin_stream(kSamplerOrder, std::uint64_t{size} * 4);
  std::vector<bool> seen(storage.capacity(), false);
  for (std::uint32_t i = 0; i < size; ++i) {
    std::uint32_t slot = 0;
    REPLAYD_RETURN_IF_ERROR(reader.read_value(slot));
    if (slot >= storage.capacity() || !occupied[slot] || seen[slot]) {
      return bad("sampler order: slot " + std::to_string(slot) +
                 " is not occupied, or is listed twice");
    }
    seen[slot] = true;
    table.sampler_->insert(slot, storage.priority(slot));
  }
  return reader.end_stream();
}

Result<std::unique_ptr<Table>> TableSnapshotAccess::read(SectionReader& reader,
                                                         std::uint64_t max_table_bytes,
                                                         std::uint32_t version,
                                                         ColumnMemorySource* memory,
                                                         std::uint64_t* items_written) {
  REPLAYD_ASSIGN_OR_RETURN(auto config_bytes, reader.section(kTableConfig));
  REPLAYD_ASSIGN_OR_RETURN(TableConfig config, read_config(config_bytes));
  const std::string name = config.name;
  std::uint64_t cold_count = 0;
  if (version >= 6) {
    auto tier_bytes = reader.section(kTierHead);
    if (!tier_bytes) return in_table(name, tier_bytes.error());
    ByteReader tier_in(*tier_bytes);
    bool tier_ok = tier_in.u64(config.file_tier.ram_bytes);
    if (tier_ok && config.file_tier.enabled()) tier_ok = tier_in.u64(cold_count);
    if (!tier_ok || tier_in.remaining() != 0) return in_table(name, bad("section TTRH: malformed"));
  }
  // Validates the whole configuration and the byte limit before allocating the columns. A
  // file tier's columns are private memory (its cold rows' pages are given back).
  if (config.file_tier.enabled()) memory = nullptr;
  auto created = Table::create(std::move(config), max_table_bytes, memory);
  if (!created) return in_table(name, created.error());
  std::unique_ptr<Table> table = std::move(created).value();
  std::vector<std::optional<ColdLocation>> cold;
  if (table->tier_) {
    auto cold_rows = read_cold_rows(reader, table->config_.capacity, cold_count);
    if (!cold_rows) return in_table(name, cold_rows.error());
    cold = std::move(cold_rows).value();
  }

  auto state_bytes = reader.section(kTableState);
  if (!state_bytes) return in_table(name, state_bytes.error());
  ByteReader in(*state_bytes);
  std::uint32_t size = 0;
  std::uint32_t reserved = 0;
  TableCounters c;
  RateLimiterCounters limiter;
  Rng::State rng{};
  double max_priority = 0;
  bool ok = in.u32(size) && in.u32(reserved);
  for (auto* value : {&c.inserts, &c.samples, &c.priority_updates, &c.stale_updates, &c.deletes,
                      &c.stale_deletes, &c.evictions, &c.expirations, &limiter.inserts,
                      &limiter.samples, &limiter.deletes, &rng[0], &rng[1], &rng[2], &rng[3]}) {
    ok = ok && in.u64(*value);
  }
  ok = ok && in.f64(max_priority) && in.remaining() == 0;
  if (!ok) return in_table(name, bad("section TSTA: state is cut short or too long"));
  if (size > table->config_.capacity) {
    return in_table(name, bad("section TSTA: " + std::to_string(size) + " items exceed capacity"));
  }
  if (limiter.deletes > limiter.inserts || limiter.inserts - limiter.deletes != size) {
    return in_table(
        name, bad("section TSTA: rate limiter counters (inserts " +
                  std::to_string(limiter.inserts) + ", deletes " + std::to_string(limiter.deletes) +
                  ") disagree with size " + std::to_string(size)));
  }
  if (rng == Rng::State{}) return in_table(name, bad("section TSTA: RNG state is all zero"));
  if (!std::isfinite(max_priority) || max_priority < 0) {
    return in_table(name, bad("section TSTA: largest priority is not finite and >= 0"));
  }
  // New items without a priority get this one: its mass must be finite too.
  if (auto status = table->sampler_->check_priority(max_priority); !status) {
    return in_table(name, bad("section TSTA: largest priority: " + status.error().message));
  }

  std::vector<bool> occupied;
  if (auto status = read_slots(reader, *table, size, occupied); !status) {
    return in_table(name, status.error());
  }
  if (auto status = read_items(reader, *table, occupied, cold); !status) {
    return in_table(name, status.error());
  }
  if (auto status = read_sampler_order(reader, *table, occupied); !status) {
    return in_table(name, status.error());
  }
  recount_versions(*table);  // every version 0 until TVRS (version 5) is read
  if (EpisodicTable* episodic = table->episodic_.get()) {
    auto status =
        read_episode_sections(reader, table->storage_, EpisodicTable::kMaxOpenEpisodes,
                              *episodic->episodes_, *episodic->step_log_, *episodic->windows_);
    if (!status) return in_table(name, status.error());
    episodic->complete_->rebuild(*episodic->episodes_);
  }
  table->counters_ = c;
  table->rate_limiter_.set_counters(limiter);
  table->rng_.set_state(rng);
  table->max_priority_ = max_priority;
  table->storage_.publish_all();
  for (std::uint32_t slot = 0; slot < cold.size(); ++slot) {
    if (cold[slot] && table->tier_->cold(slot)) table->storage_.unpublish(slot);  // as written out
  }
  if (items_written != nullptr) *items_written = table->size();
  if (version >= 2) {
    if (auto lost = drop_lost(reader, *table); !lost) return in_table(name, lost.error());
  }
  if (version >= 3) {
    REPLAYD_ASSIGN_OR_RETURN(auto metadata_bytes, reader.section(kMetadata));
    ByteReader in(metadata_bytes);
    if (!in.str(table->config_.metadata, kMaxTableMetadataBytes) || in.remaining() != 0)
      return in_table(name, bad("section TMET: malformed or longer than 1 MiB"));
  }
  if (version >= 5) {
    if (auto status = read_versions(reader, *table); !status) return in_table(name, status.error());
  }
  return table;
}

Status write_table_sections(const Table& table, SectionWriter& writer, std::uint64_t* items_lost) {
  return TableSnapshotAccess::write(table, writer, items_lost);
}

Result<std::unique_ptr<Table>> read_table_sections(SectionReader& reader,
                                                   std::uint64_t max_table_bytes,
                                                   std::uint32_t version,
                                                   ColumnMemorySource* column_memory,
                                                   std::uint64_t* items_written) {
  return TableSnapshotAccess::read(reader, max_table_bytes, version, column_memory, items_written);
}

}  // namespace replayd
