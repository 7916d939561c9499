// Tests for core/crc32c.*: the standard check value, incremental use, and that the hardware
// and table implementations agree at every length and alignment.
#include "core/snapshot/crc32c.h"

#include <catch2/catch.hpp>

#include <string_view>
#include <vector>

#include "core/rng.h"

namespace replayd {
namespace {

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

TEST_CASE("crc32c of \"123456789\" is the Castagnoli check value") {
  CHECK(crc32c(bytes_of("123456789")) == 0xe3069283u);
  CHECK(crc32c_extend_portable(0, bytes_of("123456789")) == 0xe3069283u);
  CHECK(crc32c({}) == 0u);
}

TEST_CASE("crc32c extended piece by piece equals crc32c of the whole") {
  const std::string_view text = "snapshots are checked section by section";
  for (std::size_t split = 0; split <= text.size(); ++split) {
    const auto first = crc32c(bytes_of(text.substr(0, split)));
    CHECK(crc32c_extend(first, bytes_of(text.substr(split))) == crc32c(bytes_of(text)));
  }
}

TEST_CASE("crc32c hardware and table implementations agree at every length and offset") {
  Rng rng(7);
  std::vector<std::byte> data(600);
  for (auto& b : data)
    b = std::byte(rng.next() & 0xff);
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t length = 0; length + offset <= data.size(); length += 13) {
      const auto piece = std::span<const std::byte>(data).subspan(offset, length);
      REQUIRE(crc32c(piece) == crc32c_extend_portable(0, piece));
    }
  }
}

TEST_CASE("crc32c's three-stream blocks agree with the table at and around every block size") {
  // Inputs of 3 x 256 bytes and more are cut into three streams whose crcs are joined; check
  // each size that changes how an input is cut, at every alignment, and split anywhere.
  Rng rng(11);
  std::vector<std::byte> data(2 * 3 * 8192 + 3 * 3 * 256 + 64);
  for (auto& b : data)
    b = std::byte(rng.next() & 0xff);
  std::vector<std::size_t> lengths = {767,
                                      768,
                                      769,
                                      775,
                                      776,
                                      2 * 768,
                                      3 * 8192 - 1,
                                      3 * 8192,
                                      3 * 8192 + 1,
                                      3 * 8192 + 8,
                                      3 * 8192 + 768,
                                      6 * 8192 + 2 * 768 + 13};
  for (int i = 0; i < 40; ++i)
    lengths.push_back(rng.next() % (data.size() - 8));
  for (const std::size_t length : lengths) {
    for (std::size_t offset = 0; offset < 8; ++offset) {
      const auto piece = std::span<const std::byte>(data).subspan(offset, length);
      REQUIRE(crc32c(piece) == crc32c_extend_portable(0, piece));
    }
    const std::size_t split = length / 3 + 5;
    const auto whole = std::span<const std::byte>(data).first(length);
    if (split <= length) {
      CHECK(crc32c_extend(crc32c(whole.first(split)), whole.subspan(split)) == crc32c(whole));
    }
  }
}

TEST_CASE("crc32c detects every single-byte change") {
  std::vector<std::byte> data(64, std::byte{0x5a});
  const auto original = crc32c(data);
  for (std::size_t i = 0; i < data.size(); ++i) {
    for (int flip = 1; flip < 256; flip += 37) {
      data[i] ^= std::byte(flip);
      CHECK(crc32c(data) != original);
      data[i] ^= std::byte(flip);
    }
  }
}

}  // namespace
}  // namespace replayd
