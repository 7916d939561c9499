#include "core/snapshot/value_snapshot.h"

#include <set>

namespace replayd {
namespace {

constexpr std::uint32_t kValueHeader = section_tag("VHDR");
constexpr std::uint32_t kValueData = section_tag("VDAT");
constexpr std::size_t kMaxNameChars = 128;
constexpr std::size_t kMaxArrayNameChars = 256;
constexpr std::uint32_t kMaxArrays = 4096;
constexpr std::uint32_t kMaxDims = 8;

Error bad(const std::string& what) {
  return make_error(ErrorCode::invalid_argument, "published value: " + what);
}

}  // namespace

Status write_value_sections(const SnapshotValueOut& value, SectionWriter& writer) {
  ByteWriter header;
  header.str(value.name);
  header.u64(value.version);
  header.u64(value.bytes);
  header.u32(static_cast<std::uint32_t>(value.arrays.size()));
  for (const SnapshotValueArray& array : value.arrays) {
    header.str(array.name);
    header.str(std::string(dtype_name(array.dtype)));
    header.u32(static_cast<std::uint32_t>(array.shape.size()));
    for (std::uint64_t dim : array.shape)
      header.u64(dim);
    header.u64(array.offset);
    header.u64(array.bytes);
  }
  REPLAYD_RETURN_IF_ERROR(writer.section(kValueHeader, header.data()));
  writer.begin_stream(kValueData);
  for (std::span<const std::byte> part : value.parts)
    REPLAYD_RETURN_IF_ERROR(writer.append(part));
  return writer.end_stream();
}

Result<SnapshotValueIn> read_value_sections(SectionReader& reader, std::uint64_t max_value_bytes) {
  REPLAYD_ASSIGN_OR_RETURN(auto header_bytes, reader.section(kValueHeader));
  ByteReader header(header_bytes);
  SnapshotValueIn value;
  std::uint32_t count = 0;
  if (!header.str(value.name, kMaxNameChars) || !header.u64(value.version) ||
      !header.u64(value.bytes) || !header.u32(count)) {
    return bad("section VHDR: malformed");
  }
  if (value.bytes > max_value_bytes) {
    return bad("'" + value.name + "' is " + std::to_string(value.bytes) +
               " bytes, more than max_value_bytes = " + std::to_string(max_value_bytes));
  }
  if (count == 0 || count > kMaxArrays || value.version == 0)
    return bad("'" + value.name + "': malformed header");
  std::set<std::string> names;
  for (std::uint32_t i = 0; i < count; ++i) {
    SnapshotValueArray array;
    std::string dtype;
    std::uint32_t dims = 0;
    if (!header.str(array.name, kMaxArrayNameChars) || !header.str(dtype, 16) ||
        !header.u32(dims) || dims > kMaxDims) {
      return bad("'" + value.name + "': malformed array");
    }
    const auto parsed = parse_dtype(dtype);
    if (!parsed) return bad("'" + value.name + "': unknown dtype '" + dtype + "'");
    array.dtype = *parsed;
    std::uint64_t bytes = dtype_size(array.dtype);
    for (std::uint32_t d = 0; d < dims; ++d) {
      std::uint64_t dim = 0;
      if (!header.u64(dim)) return bad("'" + value.name + "': malformed shape");
      if (dim != 0 && bytes > value.bytes / dim)
        return bad("'" + value.name + "': array '" + array.name + "' is larger than its value");
      bytes *= dim;
      array.shape.push_back(dim);
    }
    if (!header.u64(array.offset) || !header.u64(array.bytes) || array.bytes != bytes ||
        array.offset % 8 != 0 || array.offset > value.bytes ||
        array.bytes > value.bytes - array.offset || !names.insert(array.name).second) {
      return bad("'" + value.name + "': array '" + array.name + "' does not fit its payload");
    }
    value.arrays.push_back(std::move(array));
  }
  if (header.remaining() != 0) return bad("section VHDR: trailing bytes");
  value.payload = std::make_unique_for_overwrite<std::byte[]>(value.bytes ? value.bytes : 1);
  reader.begin_stream(kValueData, value.bytes);
  REPLAYD_RETURN_IF_ERROR(reader.read(std::span<std::byte>(value.payload.get(), value.bytes)));
  REPLAYD_RETURN_IF_ERROR(reader.end_stream());
  return value;
}

}  // namespace replayd
