// Tests for core/snapshot/snapshot_file.cpp and snapshot_io.h: the image around the tables
// (16-byte file header, FINF and FEND sections), its round trip with zero or more tables,
// and the refusal of a header, FINF or FEND that is short, damaged or does not match.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "core/snapshot/crc32c.h"
#include "core/snapshot/snapshot_io.h"
#include "core/snapshot/snapshot_sections.h"
#include "core/snapshot/table_snapshot.h"

namespace replayd {
namespace {

using Catch::Contains;

std::unique_ptr<Table> small_table(std::string name, std::int64_t items) {
  TableConfig config;
  config.name = std::move(name);
  auto schema = Schema::create({Field{"x", DType::int64, {}}});
  REQUIRE(schema.ok());
  config.schema = schema.value();
  config.capacity = 8;
  config.seed = 5;
  auto table = Table::create(config);
  REQUIRE(table.ok());
  std::vector<std::int64_t> values(static_cast<std::size_t>(items));
  for (std::int64_t i = 0; i < items; ++i)
    values[static_cast<std::size_t>(i)] = i * 3;
  std::vector<std::uint64_t> keys(values.size());
  const auto column = std::as_bytes(std::span(values));
  if (items > 0) REQUIRE(table.value()->insert(std::span(&column, 1), values.size(), {}, keys));
  return std::move(table).value();
}

std::vector<std::byte> image_of(const std::vector<const Table*>& tables,
                                std::uint64_t created_unix_ms = 1700000000123) {
  MemorySink sink;
  auto stats = write_snapshot(tables, created_unix_ms, sink);
  REQUIRE(stats.ok());
  CHECK(stats->bytes == sink.data().size());
  return sink.data();
}

Result<DecodedSnapshot> decode(const std::vector<std::byte>& image, SnapshotLimits limits = {}) {
  MemorySource source(image);
  return read_snapshot(source, limits);
}

std::string rejection(const std::vector<std::byte>& image, SnapshotLimits limits = {}) {
  auto decoded = decode(image, limits);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.error().code == ErrorCode::invalid_argument);
  return decoded.error().message;
}

// A file header followed by the given sections, all with valid checksums.
std::vector<std::byte> handmade(std::uint32_t finf_tables, std::span<const std::byte> finf_extra,
                                std::uint32_t fend_tables, std::uint64_t fend_items) {
  MemorySink sink;
  std::byte header[kSnapshotHeaderBytes];
  std::memcpy(header, kSnapshotMagic, 8);
  std::memcpy(header + 8, &kSnapshotVersion, 4);
  const std::uint32_t crc = crc32c(std::span<const std::byte>(header, 12));
  std::memcpy(header + 12, &crc, 4);
  REQUIRE(sink.write(header).ok());
  SectionWriter writer(sink);
  ByteWriter info;
  info.u32(finf_tables);
  info.u32(0);
  info.u64(42);
  std::vector<std::byte> info_bytes(info.data().begin(), info.data().end());
  info_bytes.insert(info_bytes.end(), finf_extra.begin(), finf_extra.end());
  REQUIRE(writer.section(section_tag("FINF"), info_bytes).ok());
  ByteWriter end;
  end.u32(fend_tables);
  end.u32(0);
  end.u64(fend_items);
  REQUIRE(writer.section(section_tag("FEND"), end.data()).ok());
  return sink.data();
}

TEST_CASE("an image starts with the magic, format version 6 and a checksum of both") {
  const auto image = image_of({});
  REQUIRE(image.size() >= kSnapshotHeaderBytes);
  CHECK(std::memcmp(image.data(), "RPLYSNAP", 8) == 0);
  std::uint32_t version = 0;
  std::uint32_t crc = 0;
  std::memcpy(&version, image.data() + 8, 4);
  std::memcpy(&crc, image.data() + 12, 4);
  CHECK(version == 6);
  CHECK(crc == crc32c(std::span(image).first(12)));
}

TEST_CASE("an image of no tables reads back as no tables with its creation time") {
  const auto image = image_of({}, 1234567890123);
  // header, then FINF and FEND, each a 16-byte section header and a 16-byte payload
  CHECK(image.size() == kSnapshotHeaderBytes + 2 * (kSectionHeaderBytes + 16));
  auto decoded = decode(image);
  REQUIRE(decoded.ok());
  CHECK(decoded->tables.empty());
  CHECK(decoded->created_unix_ms == 1234567890123);
  CHECK(decoded->stats.tables == 0);
  CHECK(decoded->stats.items == 0);
  CHECK(decoded->stats.bytes == image.size());
}

TEST_CASE("an image of several tables reads back in order with their item counts") {
  auto a = small_table("a", 3);
  auto b = small_table("b", 0);
  auto c = small_table("c", 8);
  const auto image = image_of({a.get(), b.get(), c.get()});
  auto decoded = decode(image);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->tables.size() == 3);
  CHECK(decoded->tables[0]->name() == "a");
  CHECK(decoded->tables[1]->name() == "b");
  CHECK(decoded->tables[2]->name() == "c");
  CHECK(decoded->tables[1]->size() == 0);
  CHECK(decoded->stats.tables == 3);
  CHECK(decoded->stats.items == 11);
  CHECK(decoded->stats.bytes == image.size());
}

TEST_CASE("an empty or short file is refused as truncated with its size") {
  CHECK_THAT(rejection({}), Contains("truncated") && Contains("0 bytes"));
  const auto image = image_of({});
  const std::vector<std::byte> short_header(image.begin(), image.begin() + 10);
  CHECK_THAT(rejection(short_header), Contains("truncated") && Contains("10 bytes"));
  const std::vector<std::byte> header_only(image.begin(), image.begin() + kSnapshotHeaderBytes);
  CHECK_THAT(rejection(header_only), Contains("truncated") && Contains("section header"));
}

TEST_CASE("an image cut before or inside its end section is refused as truncated") {
  auto table = small_table("t", 4);
  const auto image = image_of({table.get()});
  const std::size_t fend_section = kSectionHeaderBytes + 16;
  const std::vector<std::byte> cut(image.begin(), image.end() - fend_section);
  CHECK_THAT(rejection(cut), Contains("truncated"));
  const std::vector<std::byte> cut_inside(image.begin(), image.end() - 3);
  CHECK_THAT(rejection(cut_inside), Contains("truncated"));
}

TEST_CASE("a changed header byte is refused as bad magic or a header checksum mismatch") {
  const auto image = image_of({});
  for (std::size_t i = 0; i < kSnapshotHeaderBytes; ++i) {
    auto damaged = image;
    damaged[i] ^= std::byte{0x20};
    CAPTURE(i);
    const auto message = rejection(damaged);
    if (i < 8)
      CHECK_THAT(message, Contains("not a replayd snapshot"));
    else
      CHECK_THAT(message, Contains("file header checksum mismatch"));
  }
}

TEST_CASE("any flipped byte of an image with a table is detected") {
  auto table = small_table("t", 5);
  const auto image = image_of({table.get()});
  for (std::size_t i = 0; i < image.size(); ++i) {
    auto damaged = image;
    damaged[i] ^= std::byte{0x01};
    CAPTURE(i);
    rejection(damaged);
  }
}

TEST_CASE("a FINF section of the wrong length is refused as malformed") {
  const std::byte extra[1]{};
  const auto image = handmade(0, extra, 0, 0);
  CHECK_THAT(rejection(image), Contains("section FINF: malformed"));
  CHECK(decode(handmade(0, {}, 0, 0)).ok());
}

TEST_CASE("a FEND whose counts differ from the tables read is refused") {
  CHECK_THAT(rejection(handmade(0, {}, 1, 0)), Contains("section FEND") && Contains("count"));
  CHECK_THAT(rejection(handmade(0, {}, 0, 7)), Contains("section FEND") && Contains("count"));
}

TEST_CASE("an image with more tables than max_tables is refused before reading them") {
  auto a = small_table("a", 1);
  auto b = small_table("b", 1);
  const auto image = image_of({a.get(), b.get()});
  CHECK(decode(image, SnapshotLimits{2, std::uint64_t{1} << 30}).ok());
  CHECK_THAT(rejection(image, SnapshotLimits{1, std::uint64_t{1} << 30}),
             Contains("2 tables") && Contains("max_tables = 1"));
  CHECK_THAT(rejection(handmade(1000000, {}, 0, 0)), Contains("1000000 tables"));
}

TEST_CASE("bytes after the end section are refused") {
  auto image = image_of({});
  image.push_back(std::byte{0});
  CHECK_THAT(rejection(image), Contains("after the end section"));
}

TEST_CASE("a memory source returns fewer bytes only at the end, then zero") {
  const std::vector<std::byte> data{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4},
                                    std::byte{5}};
  MemorySource source(data);
  std::byte out[2];
  CHECK(source.read(out).value() == 2);
  CHECK(out[0] == std::byte{1});
  CHECK(source.read(out).value() == 2);
  CHECK(out[1] == std::byte{4});
  CHECK(source.read(out).value() == 1);
  CHECK(out[0] == std::byte{5});
  CHECK(source.read(out).value() == 0);
  CHECK(source.read({}).value() == 0);
}

TEST_CASE("a memory sink appends everything written to it") {
  MemorySink sink;
  const std::byte first[2]{std::byte{7}, std::byte{8}};
  const std::byte second[1]{std::byte{9}};
  CHECK(sink.write(first).ok());
  CHECK(sink.write({}).ok());
  CHECK(sink.write(second).ok());
  CHECK(sink.data() == std::vector<std::byte>{std::byte{7}, std::byte{8}, std::byte{9}});
}

}  // namespace
}  // namespace replayd

namespace replayd {

TEST_CASE(
    "published values round trip after the tables, and a damaged or oversized one is "
    "refused") {
  const auto table = small_table("t", 3);
  std::vector<std::byte> first(24), second(8);
  for (std::size_t i = 0; i < first.size(); ++i)
    first[i] = std::byte(i * 7);
  second[0] = std::byte{9};
  SnapshotValueOut value{"policy/actor",
                         12,
                         {{"w", DType::float32, {2, 3}, 0, 24}, {"b", DType::int64, {}, 24, 8}},
                         32,
                         {first, second}};
  MemorySink sink;
  const std::vector<const Table*> tables{table.get()};
  REQUIRE(write_snapshot(tables, 1, sink, std::span(&value, 1)).ok());
  const auto image = sink.data();
  auto decoded = decode(image);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->tables.size() == 1);
  REQUIRE(decoded->values.size() == 1);
  const SnapshotValueIn& read = decoded->values.front();
  CHECK(read.name == "policy/actor");
  CHECK(read.version == 12);
  REQUIRE(read.arrays.size() == 2);
  CHECK(read.arrays[0].shape == std::vector<std::uint64_t>{2, 3});
  CHECK(read.arrays[1].dtype == DType::int64);
  CHECK(read.arrays[1].offset == 24);
  CHECK(std::memcmp(read.payload.get(), first.data(), 24) == 0);
  CHECK(read.payload[24] == std::byte{9});

  SnapshotLimits small;
  small.max_value_bytes = 16;
  CHECK_THAT(rejection(image, small), Contains("more than max_value_bytes = 16"));
  SnapshotLimits none;
  none.max_values = 0;
  CHECK_THAT(rejection(image, none), Contains("more than max_values = 0"));
  auto damaged = image;
  damaged[damaged.size() - 40] ^= std::byte{1};  // inside the value's data section
  CHECK_FALSE(decode(damaged).ok());
}

}  // namespace replayd
