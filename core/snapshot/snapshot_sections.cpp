#include "core/snapshot/snapshot_sections.h"

#include <bit>
#include <cstring>

#include "core/snapshot/crc32c.h"

namespace replayd {
namespace {

static_assert(std::endian::native == std::endian::little,
              "snapshot files are little-endian and written with memcpy");

template <typename T>
void put(std::vector<std::byte>& out, T value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
T load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

std::string hex(std::uint32_t value) {
  static const char* digits = "0123456789abcdef";
  std::string text = "0x";
  for (int shift = 28; shift >= 0; shift -= 4)
    text += digits[(value >> shift) & 0xf];
  return text;
}

}  // namespace

std::string section_tag_name(std::uint32_t tag) {
  std::string name;
  for (int i = 0; i < 4; ++i) {
    const char c = static_cast<char>((tag >> (8 * i)) & 0xff);
    if (c < 'A' || c > 'Z') return hex(tag);
    name += c;
  }
  return name;
}

void ByteWriter::u32(std::uint32_t value) {
  put(bytes_, value);
}
void ByteWriter::u64(std::uint64_t value) {
  put(bytes_, value);
}
void ByteWriter::f64(double value) {
  put(bytes_, value);
}
void ByteWriter::str(const std::string& value) {
  u32(static_cast<std::uint32_t>(value.size()));
  const auto* p = reinterpret_cast<const std::byte*>(value.data());
  bytes_.insert(bytes_.end(), p, p + value.size());
}

bool ByteReader::u8(std::uint8_t& out) {
  if (remaining() < 1) return false;
  out = std::to_integer<std::uint8_t>(data_[position_++]);
  return true;
}

bool ByteReader::u32(std::uint32_t& out) {
  if (remaining() < 4) return false;
  out = load<std::uint32_t>(data_.data() + position_);
  position_ += 4;
  return true;
}

bool ByteReader::u64(std::uint64_t& out) {
  if (remaining() < 8) return false;
  out = load<std::uint64_t>(data_.data() + position_);
  position_ += 8;
  return true;
}

bool ByteReader::f64(double& out) {
  if (remaining() < 8) return false;
  out = load<double>(data_.data() + position_);
  position_ += 8;
  return true;
}

bool ByteReader::str(std::string& out, std::size_t max_chars) {
  std::uint32_t length = 0;
  if (remaining() < 4) return false;
  length = load<std::uint32_t>(data_.data() + position_);
  if (length > max_chars || remaining() - 4 < length) return false;
  position_ += 4;
  out.assign(reinterpret_cast<const char*>(data_.data() + position_), length);
  position_ += length;
  return true;
}

SectionWriter::SectionWriter(SnapshotSink& sink) : sink_(sink) {}

Status SectionWriter::write(std::span<const std::byte> bytes) {
  REPLAYD_RETURN_IF_ERROR(sink_.write(bytes));
  bytes_written_ += bytes.size();
  return Ok{};
}

Status SectionWriter::section(std::uint32_t tag, std::span<const std::byte> payload) {
  std::vector<std::byte> header;
  header.reserve(kSectionHeaderBytes);
  put(header, tag);
  put(header, static_cast<std::uint32_t>(payload.size()));
  put(header, crc32c(payload));
  put(header, crc32c(header));
  REPLAYD_RETURN_IF_ERROR(write(header));
  return write(payload);
}

void SectionWriter::begin_stream(std::uint32_t tag) {
  stream_tag_ = tag;
  buffer_.clear();
  buffer_.reserve(kMaxSectionPayloadBytes);
}

Status SectionWriter::append(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const std::size_t room = kMaxSectionPayloadBytes - buffer_.size();
    const std::size_t n = std::min(room, bytes.size());
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    bytes = bytes.subspan(n);
    if (buffer_.size() == kMaxSectionPayloadBytes) REPLAYD_RETURN_IF_ERROR(flush());
  }
  return Ok{};
}

Status SectionWriter::flush() {
  if (buffer_.empty()) return Ok{};
  REPLAYD_RETURN_IF_ERROR(section(stream_tag_, buffer_));
  buffer_.clear();
  return Ok{};
}

Status SectionWriter::end_stream() {
  return flush();
}

SectionReader::SectionReader(SnapshotSource& source, std::uint64_t offset)
    : source_(source), offset_(offset) {}

Error SectionReader::corrupt(std::uint64_t at, std::uint32_t tag, const std::string& reason) const {
  return make_error(ErrorCode::invalid_argument, "section " + section_tag_name(tag) + " at byte " +
                                                     std::to_string(at) + ": " + reason);
}

Status SectionReader::read_exactly(std::span<std::byte> out, const char* what) {
  REPLAYD_ASSIGN_OR_RETURN(std::size_t n, source_.read(out));
  if (n != out.size()) {
    return make_error(ErrorCode::invalid_argument,
                      "truncated at byte " + std::to_string(offset_ + n) + ": " + what + " needs " +
                          std::to_string(out.size()) + " bytes, only " + std::to_string(n) +
                          " remain");
  }
  offset_ += n;
  return Ok{};
}

Result<std::span<const std::byte>> SectionReader::section(std::uint32_t tag,
                                                          std::uint32_t max_payload_bytes) {
  const std::uint64_t at = offset_;
  std::byte header[kSectionHeaderBytes];
  REPLAYD_RETURN_IF_ERROR(read_exactly(header, "a section header"));
  const auto stored_tag = load<std::uint32_t>(header);
  const auto length = load<std::uint32_t>(header + 4);
  const auto payload_crc = load<std::uint32_t>(header + 8);
  const auto header_crc = load<std::uint32_t>(header + 12);
  if (crc32c(std::span<const std::byte>(header, 12)) != header_crc) {
    return corrupt(at, tag, "header checksum mismatch");
  }
  if (stored_tag != tag) {
    return corrupt(at, tag, "found section " + section_tag_name(stored_tag) + " instead");
  }
  if (length > max_payload_bytes) {
    return corrupt(at, tag,
                   "payload of " + std::to_string(length) + " bytes exceeds the limit of " +
                       std::to_string(max_payload_bytes));
  }
  payload_.resize(length);
  payload_position_ = 0;
  REPLAYD_RETURN_IF_ERROR(read_exactly(payload_, "a section payload"));
  const std::uint32_t computed = crc32c(payload_);
  if (computed != payload_crc) {
    return corrupt(at, tag,
                   "payload checksum mismatch (stored " + hex(payload_crc) + ", computed " +
                       hex(computed) + ")");
  }
  return std::span<const std::byte>(payload_);
}

void SectionReader::begin_stream(std::uint32_t tag, std::uint64_t total_bytes) {
  stream_tag_ = tag;
  stream_left_ = total_bytes;
  payload_.clear();
  payload_position_ = 0;
}

Status SectionReader::read(std::span<std::byte> out) {
  while (!out.empty()) {
    if (payload_position_ == payload_.size()) {
      if (stream_left_ == 0) {
        return make_error(ErrorCode::invalid_argument,
                          "stream " + section_tag_name(stream_tag_) + " ended early");
      }
      const std::uint64_t at = offset_;
      REPLAYD_ASSIGN_OR_RETURN(auto payload, section(stream_tag_));
      if (payload.empty() || payload.size() > stream_left_) {
        return corrupt(at, stream_tag_,
                       "holds " + std::to_string(payload.size()) + " bytes where the stream has " +
                           std::to_string(stream_left_) + " left");
      }
      stream_left_ -= payload.size();
    }
    const std::size_t n = std::min(out.size(), payload_.size() - payload_position_);
    std::memcpy(out.data(), payload_.data() + payload_position_, n);
    payload_position_ += n;
    out = out.subspan(n);
  }
  return Ok{};
}

Status SectionReader::end_stream() {
  if (stream_left_ != 0 || payload_position_ != payload_.size()) {
    return make_error(
        ErrorCode::invalid_argument,
        "stream " + section_tag_name(stream_tag_) + " holds more bytes than its " + "table needs");
  }
  return Ok{};
}

Status SectionReader::expect_end() {
  std::byte extra[1];
  REPLAYD_ASSIGN_OR_RETURN(std::size_t n, source_.read(extra));
  if (n != 0) {
    return make_error(ErrorCode::invalid_argument,
                      "unexpected bytes after the end section at byte " + std::to_string(offset_));
  }
  return Ok{};
}

}  // namespace replayd
