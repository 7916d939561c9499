// Published values in snapshot images (format version 4, docs/SNAPSHOT.md): after the
// tables, each value as a header section (VHDR: name, version, arrays) and its bytes as a
// stream (VDAT). A value is opaque here: named arrays over one payload, as the server keeps
// them (service/values/value_store.h).
// Decoding trusts nothing: names, counts and sizes are checked against their limits before
// anything is allocated, the arrays' layout against the payload.
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "core/snapshot/snapshot_sections.h"

namespace replayd {

struct SnapshotValueArray {
  std::string name;
  DType dtype = DType::uint8;
  std::vector<std::uint64_t> shape;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

// A value to write: its payload as pieces (borrowed; they sum to `bytes`).
struct SnapshotValueOut {
  std::string name;
  std::uint64_t version = 0;
  std::vector<SnapshotValueArray> arrays;
  std::uint64_t bytes = 0;
  std::vector<std::span<const std::byte>> parts;
};

// A value read back: its payload in one block.
struct SnapshotValueIn {
  std::string name;
  std::uint64_t version = 0;
  std::vector<SnapshotValueArray> arrays;
  std::uint64_t bytes = 0;
  std::unique_ptr<std::byte[]> payload;
};

Status write_value_sections(const SnapshotValueOut& value, SectionWriter& writer);
// `max_value_bytes`: a larger value rejects the image (as a larger table does).
Result<SnapshotValueIn> read_value_sections(SectionReader& reader, std::uint64_t max_value_bytes);

}  // namespace replayd
