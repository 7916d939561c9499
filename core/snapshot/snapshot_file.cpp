// The snapshot image around the tables: file header, FINF and FEND sections.
#include <cstring>

#include "core/snapshot/crc32c.h"
#include "core/snapshot/table_snapshot.h"

namespace replayd {
namespace {

constexpr std::uint32_t kFileInfo = section_tag("FINF");
constexpr std::uint32_t kFileEnd = section_tag("FEND");

Error bad(const std::string& what) {
  return make_error(ErrorCode::invalid_argument, what);
}

}  // namespace

Result<SnapshotStats> write_snapshot(std::span<const Table* const> tables,
                                     std::uint64_t created_unix_ms, SnapshotSink& sink,
                                     std::span<const SnapshotValueOut> values) {
  std::byte header[kSnapshotHeaderBytes];
  std::memcpy(header, kSnapshotMagic, 8);
  std::memcpy(header + 8, &kSnapshotVersion, 4);
  const std::uint32_t header_crc = crc32c(std::span<const std::byte>(header, 12));
  std::memcpy(header + 12, &header_crc, 4);
  REPLAYD_RETURN_IF_ERROR(sink.write(header));

  SectionWriter writer(sink);
  SnapshotStats stats;
  stats.tables = static_cast<std::uint32_t>(tables.size());
  ByteWriter info;
  info.u32(stats.tables);
  info.u32(static_cast<std::uint32_t>(values.size()));
  info.u64(created_unix_ms);
  REPLAYD_RETURN_IF_ERROR(writer.section(kFileInfo, info.data()));
  std::uint64_t written = 0;  // FEND counts every item written, lost ones included
  for (const Table* table : tables) {
    std::uint64_t lost = 0;
    REPLAYD_RETURN_IF_ERROR(write_table_sections(*table, writer, &lost));
    written += table->size();
    stats.items_dropped += lost;
  }
  for (const SnapshotValueOut& value : values)
    REPLAYD_RETURN_IF_ERROR(write_value_sections(value, writer));
  stats.items = written - stats.items_dropped;
  ByteWriter end;
  end.u32(stats.tables);
  end.u32(static_cast<std::uint32_t>(values.size()));
  end.u64(written);
  REPLAYD_RETURN_IF_ERROR(writer.section(kFileEnd, end.data()));
  stats.bytes = kSnapshotHeaderBytes + writer.bytes_written();
  return stats;
}

Result<DecodedSnapshot> read_snapshot(SnapshotSource& source, const SnapshotLimits& limits) {
  std::byte header[kSnapshotHeaderBytes];
  REPLAYD_ASSIGN_OR_RETURN(std::size_t n, source.read(header));
  if (n != kSnapshotHeaderBytes) {
    return bad("truncated: the file holds " + std::to_string(n) + " bytes, less than a header");
  }
  if (std::memcmp(header, kSnapshotMagic, 8) != 0) return bad("not a replayd snapshot (bad magic)");
  std::uint32_t version = 0;
  std::uint32_t stored_crc = 0;
  std::memcpy(&version, header + 8, 4);
  std::memcpy(&stored_crc, header + 12, 4);
  if (crc32c(std::span<const std::byte>(header, 12)) != stored_crc) {
    return bad("file header checksum mismatch");
  }
  if (version < kOldestSnapshotVersion || version > kSnapshotVersion) {
    return bad("unknown snapshot format version " + std::to_string(version) +
               " (this server reads versions " + std::to_string(kOldestSnapshotVersion) + " to " +
               std::to_string(kSnapshotVersion) + ")");
  }
  SectionReader reader(source, kSnapshotHeaderBytes);
  REPLAYD_ASSIGN_OR_RETURN(auto info_bytes, reader.section(kFileInfo));
  ByteReader info(info_bytes);
  DecodedSnapshot decoded;
  std::uint32_t table_count = 0;
  std::uint32_t value_count = 0;  // 0 before version 4
  if (!info.u32(table_count) || !info.u32(value_count) || !info.u64(decoded.created_unix_ms) ||
      info.remaining() != 0 || (version < 4 && value_count != 0)) {
    return bad("section FINF: malformed");
  }
  if (value_count > limits.max_values) {
    return bad("the snapshot holds " + std::to_string(value_count) +
               " published values, more than max_values = " + std::to_string(limits.max_values));
  }
  if (table_count > limits.max_tables) {
    return bad("the snapshot holds " + std::to_string(table_count) +
               " tables, more than max_tables = " + std::to_string(limits.max_tables));
  }
  for (std::uint32_t i = 0; i < table_count; ++i) {
    std::uint64_t items_written = 0;
    REPLAYD_ASSIGN_OR_RETURN(auto table,
                             read_table_sections(reader, limits.max_table_bytes, version,
                                                 limits.column_memory, &items_written));
    decoded.stats.items += items_written;
    decoded.tables.push_back(std::move(table));
  }
  for (std::uint32_t i = 0; i < value_count; ++i) {
    REPLAYD_ASSIGN_OR_RETURN(auto value, read_value_sections(reader, limits.max_value_bytes));
    decoded.values.push_back(std::move(value));
  }
  REPLAYD_ASSIGN_OR_RETURN(auto end_bytes, reader.section(kFileEnd));
  ByteReader end(end_bytes);
  std::uint32_t end_tables = 0;
  std::uint32_t end_values = 0;
  std::uint64_t end_items = 0;
  if (!end.u32(end_tables) || !end.u32(end_values) || !end.u64(end_items) || end.remaining() != 0 ||
      end_tables != table_count || end_values != value_count || end_items != decoded.stats.items) {
    return bad("section FEND: table or item count does not match the tables read");
  }
  REPLAYD_RETURN_IF_ERROR(reader.expect_end());
  decoded.stats.tables = table_count;
  decoded.stats.bytes = reader.offset();
  return decoded;
}

}  // namespace replayd
