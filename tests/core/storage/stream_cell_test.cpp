// Tests for core/storage/stream_cell.h: whatever the size and the alignment of either side,
// the destination receives exactly the source's bytes and nothing around it is written (the
// neighbouring cells are other items).
#include "core/storage/stream_cell.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace replayd {
namespace {

constexpr std::byte kUntouched{0xA5};

TEST_CASE("stream_cell copies every byte and writes nothing outside the cell") {
  Rng rng(11);
  // Both sides of kStreamCellBytes, whole and partial 64-byte lines, a W2 frame stack.
  const std::uint64_t sizes[] = {0,    1,    15,   16,   63,    64,    100,      4095,
                                 4096, 4097, 4111, 8192, 28224, 28237, 65536 + 5};
  for (const std::uint64_t bytes : sizes) {
    std::vector<std::byte> source(bytes + 16);
    for (auto& b : source)
      b = static_cast<std::byte>(rng.uniform_below(256));
    for (std::uint64_t to_offset = 0; to_offset < 16; to_offset += 3) {
      for (std::uint64_t from_offset = 0; from_offset < 16; from_offset += 5) {
        // The destination starts to_offset bytes after a 64-byte boundary, so that every
        // kind of unaligned head occurs.
        std::vector<std::byte> padded(bytes + 128, kUntouched);
        const auto to_boundary = (64 - reinterpret_cast<std::uintptr_t>(padded.data()) % 64) % 64;
        std::byte* to = padded.data() + to_boundary + to_offset;
        stream_cell(to, source.data() + from_offset, bytes);
        INFO("bytes " << bytes << ", destination offset " << to_offset << ", source offset "
                      << from_offset);
        for (std::uint64_t i = 0; i < bytes; ++i)
          REQUIRE(to[i] == source[from_offset + i]);
        for (const std::byte* p = padded.data(); p < to; ++p)
          REQUIRE(*p == kUntouched);
        for (const std::byte* p = to + bytes; p < padded.data() + padded.size(); ++p)
          REQUIRE(*p == kUntouched);
      }
    }
  }
}

}  // namespace
}  // namespace replayd
