// The 32-byte frame header of docs/PROTOCOL.md: encoding a request header and decoding a
// reply header. Pure functions over bytes, no sockets; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace replayd::client {

inline constexpr std::size_t kHeaderBytes = 32;
inline constexpr std::uint8_t kProtocolVersion = 1;
inline constexpr std::uint8_t kRequestKind = 1;
inline constexpr std::uint8_t kReplyKind = 2;
// Every column in a payload starts at a multiple of this many bytes.
inline constexpr std::size_t kColumnAlignment = 8;

struct FrameHeader {
  std::uint64_t request_id = 0;
  std::uint32_t meta_bytes = 0;
  std::uint64_t payload_bytes = 0;
};

using HeaderBytes = std::array<std::byte, kHeaderBytes>;

// A request header (kind 1, flags 0, reserved 0) in wire format.
HeaderBytes encode_request_header(const FrameHeader& header);

// Decodes a reply header. Returns an empty string on success, else what is wrong (bad
// magic, version, kind, flags or reserved bytes, meta_bytes 0); `out` is then unspecified.
std::string decode_reply_header(std::span<const std::byte, kHeaderBytes> bytes, FrameHeader& out);

// Bytes of padding after a column of `bytes` bytes so that the next one starts aligned.
constexpr std::size_t padding_after(std::size_t bytes) {
  return (kColumnAlignment - bytes % kColumnAlignment) % kColumnAlignment;
}

}  // namespace replayd::client
