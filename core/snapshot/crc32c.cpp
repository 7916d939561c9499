#include "core/snapshot/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace replayd {
namespace {

constexpr std::uint32_t kPolynomial = 0x82f63b78;  // Castagnoli, reflected

using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables tables{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ ((crc & 1) ? kPolynomial : 0);
    tables[0][i] = crc;
  }
  for (std::uint32_t i = 0; i < 256; ++i) {
    for (std::size_t t = 1; t < 8; ++t) {
      tables[t][i] = (tables[t - 1][i] >> 8) ^ tables[0][tables[t - 1][i] & 0xff];
    }
  }
  return tables;
}

constexpr Tables kTables = make_tables();

std::uint32_t extend_portable(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  while (n >= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    word ^= crc;  // little-endian: the low 4 bytes absorb the running crc
    crc = kTables[7][word & 0xff] ^ kTables[6][(word >> 8) & 0xff] ^
          kTables[5][(word >> 16) & 0xff] ^ kTables[4][(word >> 24) & 0xff] ^
          kTables[3][(word >> 32) & 0xff] ^ kTables[2][(word >> 40) & 0xff] ^
          kTables[1][(word >> 48) & 0xff] ^ kTables[0][word >> 56];
    p += 8;
    n -= 8;
  }
  while (n-- > 0)
    crc = (crc >> 8) ^ kTables[0][(crc ^ *p++) & 0xff];
  return crc;
}

#if defined(__x86_64__)
// The crc32 instruction has a latency of three cycles and a throughput of one a cycle, so one
// running crc uses a third of it. Long inputs are cut into blocks of three equal streams,
// each with its own register, and the three are joined: a CRC register is linear in its start
// value and its data, so crc(r, A B) == shift_|B|(crc(r, A)) ^ crc(0, B), where shift_n(r) is r
// carried through n zero bytes (r times x^8n mod P). shift_n is linear in r's 32 bits and is a
// table of 4 x 256 entries per stream length (the zeros operator of zlib's crc32_combine).
constexpr std::size_t kLongStream = 8192;
constexpr std::size_t kShortStream = 256;

struct ShiftTable {
  std::array<std::array<std::uint32_t, 256>, 4> by_byte{};

  std::uint32_t shift(std::uint64_t crc) const {
    return by_byte[0][crc & 0xff] ^ by_byte[1][(crc >> 8) & 0xff] ^ by_byte[2][(crc >> 16) & 0xff] ^
           by_byte[3][(crc >> 24) & 0xff];
  }
};

__attribute__((target("sse4.2"))) ShiftTable make_shift_table(std::size_t zero_bytes) {
  ShiftTable table;
  for (std::size_t position = 0; position < 4; ++position) {
    for (std::uint64_t byte = 0; byte < 256; ++byte) {
      std::uint64_t crc = byte << (8 * position);
      for (std::size_t i = 0; i < zero_bytes / 8; ++i)
        crc = _mm_crc32_u64(crc, 0);
      table.by_byte[position][byte] = static_cast<std::uint32_t>(crc);
    }
  }
  return table;
}

// Built on first use (about a millisecond), then read-only: safe from any thread.
const ShiftTable& long_shift() {
  static const ShiftTable table = make_shift_table(kLongStream);
  return table;
}

const ShiftTable& short_shift() {
  static const ShiftTable table = make_shift_table(kShortStream);
  return table;
}

__attribute__((target("sse4.2"))) inline std::uint64_t load_word(const unsigned char* p) {
  std::uint64_t word;
  std::memcpy(&word, p, 8);
  return word;
}

// Consumes as many blocks of three `stream`-byte streams as `n` holds.
__attribute__((target("sse4.2"))) std::uint64_t extend_three_streams(std::uint64_t crc,
                                                                     const unsigned char*& p,
                                                                     std::size_t& n,
                                                                     std::size_t stream,
                                                                     const ShiftTable& shift) {
  while (n >= 3 * stream) {
    std::uint64_t first = crc, second = 0, third = 0;
    const unsigned char* const end = p + stream;
    for (; p < end; p += 8) {
      first = _mm_crc32_u64(first, load_word(p));
      second = _mm_crc32_u64(second, load_word(p + stream));
      third = _mm_crc32_u64(third, load_word(p + 2 * stream));
    }
    crc = shift.shift(shift.shift(first) ^ second) ^ third;
    p += 2 * stream;
    n -= 3 * stream;
  }
  return crc;
}

__attribute__((target("sse4.2"))) std::uint32_t extend_sse42(std::uint32_t crc,
                                                             const unsigned char* p,
                                                             std::size_t n) {
  std::uint64_t crc64 = crc;
  if (n >= 3 * kLongStream) crc64 = extend_three_streams(crc64, p, n, kLongStream, long_shift());
  if (n >= 3 * kShortStream) crc64 = extend_three_streams(crc64, p, n, kShortStream, short_shift());
  while (n >= 8) {
    crc64 = _mm_crc32_u64(crc64, load_word(p));
    p += 8;
    n -= 8;
  }
  auto crc32 = static_cast<std::uint32_t>(crc64);
  while (n-- > 0)
    crc32 = _mm_crc32_u8(crc32, *p++);
  return crc32;
}

bool has_sse42() {
  static const bool supported = __builtin_cpu_supports("sse4.2");
  return supported;
}
#endif

}  // namespace

std::uint32_t crc32c_extend(std::uint32_t crc, std::span<const std::byte> bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  crc = ~crc;
#if defined(__x86_64__)
  if (has_sse42()) return ~extend_sse42(crc, p, bytes.size());
#endif
  return ~extend_portable(crc, p, bytes.size());
}

std::uint32_t crc32c_extend_portable(std::uint32_t crc, std::span<const std::byte> bytes) {
  return ~extend_portable(~crc, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

}  // namespace replayd
