// Section framing of snapshot files (docs/SNAPSHOT.md): every section is a 16-byte header
//   tag u32 | payload_bytes u32 | payload_crc32c u32 | header_crc32c u32 (of the first 12)
// and then payload_bytes bytes, all little-endian. A logical stream longer than
// kMaxSectionPayloadBytes (a table's items, its key generations...) is split over
// consecutive sections of the same tag; the reader knows each stream's exact length in
// advance and checks it. Nothing read is used before its section's checksum matched.
// Not thread-safe; one writer or reader per file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/snapshot/snapshot_io.h"

namespace replayd {

inline constexpr std::uint32_t kSectionHeaderBytes = 16;
inline constexpr std::uint32_t kMaxSectionPayloadBytes = 1u << 20;  // bytes, 1 MiB

// A tag from four ASCII characters, e.g. section_tag("TITM").
constexpr std::uint32_t section_tag(const char (&name)[5]) {
  return std::uint32_t(std::uint8_t(name[0])) | std::uint32_t(std::uint8_t(name[1])) << 8 |
         std::uint32_t(std::uint8_t(name[2])) << 16 | std::uint32_t(std::uint8_t(name[3])) << 24;
}
// "TITM", or the hexadecimal value when the tag is not printable.
std::string section_tag_name(std::uint32_t tag);

// Appends little-endian values to a byte vector.
class ByteWriter {
 public:
  void u8(std::uint8_t value) { bytes_.push_back(std::byte{value}); }
  void u32(std::uint32_t value);
  void u64(std::uint64_t value);
  void f64(double value);
  void str(const std::string& value);  // u32 length, then the bytes
  std::span<const std::byte> data() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

// Bounds-checked little-endian cursor over a borrowed span. Each read returns false (and
// reads nothing) when too few bytes remain.
class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> data) : data_(data) {}
  bool u8(std::uint8_t& out);
  bool u32(std::uint32_t& out);
  bool u64(std::uint64_t& out);
  bool f64(double& out);
  // A u32 length (rejected above max_chars before anything is allocated), then the bytes.
  bool str(std::string& out, std::size_t max_chars);
  std::size_t remaining() const { return data_.size() - position_; }

 private:
  std::span<const std::byte> data_;
  std::size_t position_ = 0;
};

class SectionWriter {
 public:
  explicit SectionWriter(SnapshotSink& sink);

  // Writes one whole section. payload.size() <= kMaxSectionPayloadBytes.
  Status section(std::uint32_t tag, std::span<const std::byte> payload);

  // A stream: begin_stream, any number of append, end_stream. Sections are written as the
  // buffer (kMaxSectionPayloadBytes) fills; an empty stream writes no section.
  void begin_stream(std::uint32_t tag);
  Status append(std::span<const std::byte> bytes);
  template <typename T>
  Status append_value(const T& value) {  // trivially copyable T, host order = little-endian
    return append(std::as_bytes(std::span<const T>(&value, 1)));
  }
  Status end_stream();

  // Bytes handed to the sink so far.
  std::uint64_t bytes_written() const { return bytes_written_; }

 private:
  Status flush();
  Status write(std::span<const std::byte> bytes);

  SnapshotSink& sink_;
  std::uint32_t stream_tag_ = 0;
  std::vector<std::byte> buffer_;
  std::uint64_t bytes_written_ = 0;
};

class SectionReader {
 public:
  // `offset`: bytes of the file before the first section (for messages only).
  SectionReader(SnapshotSource& source, std::uint64_t offset);

  // Reads the next section, which must carry `tag` and hold at most max_payload_bytes;
  // checks both checksums. The payload stays valid until the next call. Errors
  // (invalid_argument) name the section, its byte offset and the reason: truncated,
  // unexpected tag, length over the limit, checksum mismatch.
  Result<std::span<const std::byte>> section(
      std::uint32_t tag, std::uint32_t max_payload_bytes = kMaxSectionPayloadBytes);

  // A stream of exactly `total_bytes` bytes in sections of `tag`.
  void begin_stream(std::uint32_t tag, std::uint64_t total_bytes);
  // Fills `out` with the stream's next bytes, loading (and checking) sections as needed.
  // Fails when the stream would run past total_bytes or a section fails its checks.
  Status read(std::span<std::byte> out);
  template <typename T>
  Status read_value(T& value) {
    return read(std::as_writable_bytes(std::span<T>(&value, 1)));
  }
  // Succeeds when exactly total_bytes were read and no section holds more.
  Status end_stream();

  // Fails unless the source has no byte left.
  Status expect_end();
  std::uint64_t offset() const { return offset_; }

 private:
  Status read_exactly(std::span<std::byte> out, const char* what);
  Error corrupt(std::uint64_t at, std::uint32_t tag, const std::string& reason) const;

  SnapshotSource& source_;
  std::uint64_t offset_;
  std::vector<std::byte> payload_;
  std::size_t payload_position_ = 0;
  std::uint32_t stream_tag_ = 0;
  std::uint64_t stream_left_ = 0;
};

}  // namespace replayd
