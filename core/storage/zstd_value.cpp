#include "core/storage/zstd_value.h"

#include <string>

namespace replayd {
namespace {

constexpr std::uint32_t kMagic = 0xFD2FB528u;
constexpr std::uint32_t kMaxBlockBytes = 128 * 1024;

Error bad(std::string message) {
  return make_error(ErrorCode::invalid_argument, "not a zstd frame: " + std::move(message));
}

std::uint64_t little_endian(std::span<const std::byte> bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = bytes.size(); i-- > 0;)
    value = (value << 8) | std::to_integer<std::uint64_t>(bytes[i]);
  return value;
}

}  // namespace

Status check_zstd_frame(std::span<const std::byte> frame, std::uint64_t content_bytes) {
  if (frame.size() < 6) return bad(std::to_string(frame.size()) + " bytes, too short");
  if (frame.size() > max_zstd_frame_bytes(content_bytes)) {
    return bad(std::to_string(frame.size()) + " bytes, more than any compression of " +
               std::to_string(content_bytes) + " bytes needs");
  }
  if (little_endian(frame.first(4)) != kMagic) return bad("wrong magic number");
  const auto descriptor = std::to_integer<unsigned>(frame[4]);
  const unsigned size_flag = descriptor >> 6;
  const bool single_segment = (descriptor >> 5) & 1u;
  const bool checksum = (descriptor >> 2) & 1u;
  const unsigned dictionary_flag = descriptor & 3u;
  if ((descriptor >> 3) & 1u) return bad("reserved header bit set");
  if (dictionary_flag != 0) return bad("frames made with a dictionary are not accepted");
  const std::size_t size_bytes = size_flag == 0 ? (single_segment ? 1 : 0) : (1u << size_flag);
  if (size_bytes == 0) return bad("the header does not declare the content size");
  std::size_t at = 5 + (single_segment ? 0 : 1);
  if (frame.size() < at + size_bytes) return bad("header truncated");
  std::uint64_t declared = little_endian(frame.subspan(at, size_bytes));
  if (size_bytes == 2) declared += 256;
  at += size_bytes;
  if (declared != content_bytes) {
    return bad("the header declares " + std::to_string(declared) + " bytes, the field holds " +
               std::to_string(content_bytes));
  }
  while (true) {
    if (frame.size() < at + 3) return bad("block header truncated at byte " + std::to_string(at));
    const std::uint64_t header = little_endian(frame.subspan(at, 3));
    at += 3;
    const bool last = header & 1u;
    const unsigned type = (header >> 1) & 3u;
    const std::uint64_t size = header >> 3;
    if (type == 3) return bad("reserved block type");
    if (size > kMaxBlockBytes) return bad("block larger than 128 KiB");
    const std::uint64_t stored = type == 1 ? 1 : size;  // an RLE block stores one byte
    if (frame.size() - at < stored) return bad("block truncated at byte " + std::to_string(at));
    at += stored;
    if (last) break;
  }
  if (checksum) at += 4;
  if (at != frame.size()) {
    return bad("the frame takes " + std::to_string(at) + " bytes, " + std::to_string(frame.size()) +
               " were given");
  }
  return Ok{};
}

}  // namespace replayd
