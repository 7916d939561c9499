// libFuzzer target: snapshot files as a damaged disk or a hostile volume could hand them to a
// starting server, through read_snapshot. Checksums would stop nearly every mutation at the
// first section, so unless the input's first byte is odd, the target first rewrites every
// checksum (file header, each section header and payload) to match the mutated bytes: the
// decoders behind the checksums then see the mutations. Checks beyond "no crash, no
// sanitizer report": an image that decodes writes back, and the written image decodes to the
// same tables and item counts (a decoded table is a valid table). Small limits keep every
// input's allocations to a few MiB. Build and run: scripts/fuzz-snapshots (clang 14).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "core/snapshot/crc32c.h"
#include "core/snapshot/snapshot_io.h"
#include "core/snapshot/snapshot_sections.h"
#include "core/snapshot/table_snapshot.h"

namespace {

using namespace replayd;

void put_u32(std::byte* at, std::uint32_t value) { std::memcpy(at, &value, 4); }

std::uint32_t get_u32(const std::byte* at) {
  std::uint32_t value;
  std::memcpy(&value, at, 4);
  return value;
}

// Rewrites the file header's checksum and every section's two checksums in place, walking
// sections by their (mutated) lengths; a length past the end is left for the reader.
void fix_checksums(std::vector<std::byte>& image) {
  if (image.size() < kSnapshotHeaderBytes) return;
  put_u32(image.data() + 12, crc32c(std::span<const std::byte>(image.data(), 12)));
  std::size_t at = kSnapshotHeaderBytes;
  while (at + kSectionHeaderBytes <= image.size()) {
    std::byte* header = image.data() + at;
    const std::uint32_t payload_bytes = get_u32(header + 4);
    const std::size_t payload_at = at + kSectionHeaderBytes;
    if (payload_bytes > image.size() - payload_at) return;
    put_u32(header + 8, crc32c(std::span<const std::byte>(image.data() + payload_at,
                                                          payload_bytes)));
    put_u32(header + 12, crc32c(std::span<const std::byte>(header, 12)));
    at = payload_at + payload_bytes;
  }
}

SnapshotLimits fuzz_limits() {
  SnapshotLimits limits;
  limits.max_tables = 8;
  limits.max_table_bytes = 16 << 20;  // an episodic table counts 10 MiB of open episodes
  return limits;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool raw = (data[0] & 1) != 0;
  std::vector<std::byte> image(size - 1);
  if (!image.empty()) std::memcpy(image.data(), data + 1, image.size());
  if (!raw) fix_checksums(image);

  MemorySource source(image);
  auto decoded = read_snapshot(source, fuzz_limits());
  if (!decoded) return 0;

  // A decoded image is valid: it writes back and decodes to the same tables.
  std::vector<const Table*> tables;
  for (const auto& table : decoded->tables)
    tables.push_back(table.get());
  MemorySink sink;
  auto written = write_snapshot(tables, decoded->created_unix_ms, sink);
  if (!written) std::abort();
  MemorySource again(sink.data());
  auto reread = read_snapshot(again, fuzz_limits());
  if (!reread || reread->tables.size() != decoded->tables.size()) std::abort();
  for (std::size_t i = 0; i < tables.size(); ++i) {
    if (reread->tables[i]->size() != tables[i]->size() ||
        reread->tables[i]->name() != tables[i]->name()) {
      std::abort();
    }
  }
  return 0;
}
