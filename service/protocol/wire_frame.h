// Frame codec: the 32-byte header of docs/PROTOCOL.md and a pure, incremental decoder fed
// bytes piece by piece. No sockets here; limits are given at construction and checked on
// the header, before any allocation for the frame's body.
// Threading: a FrameDecoder belongs to one connection; not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "service/protocol/byte_buffer.h"

namespace replayd::service {

inline constexpr std::size_t kHeaderBytes = 32;
inline constexpr std::array<std::uint8_t, 4> kMagic{'R', 'P', 'L', 'Y'};
inline constexpr std::uint8_t kProtocolVersion = 1;

enum class FrameKind : std::uint8_t { request = 1, reply = 2 };

struct FrameHeader {
  FrameKind kind = FrameKind::request;
  std::uint64_t request_id = 0;
  std::uint32_t meta_bytes = 0;
  std::uint64_t payload_bytes = 0;
};

// Writes `header` in wire format into `out`.
void encode_header(const FrameHeader& header, std::span<std::byte, kHeaderBytes> out);

struct FrameLimits {
  std::uint64_t max_frame_bytes = std::uint64_t{256} << 20;  // header + meta + payload
  std::uint32_t max_meta_bytes = 64 << 10;
};

// A complete request frame. The payload buffer is 8-aligned (operator new), so its columns
// can be viewed as typed arrays in place.
struct WireFrame {
  FrameHeader header;
  std::string meta;
  ByteBuffer payload;
};

// Why decoding stopped for good. After an error the decoder accepts nothing more: the
// frame boundary is lost and the connection must be closed after one error reply.
enum class DecodeError {
  none,
  bad_magic,
  bad_version,
  bad_kind,
  bad_flags,
  bad_reserved,
  empty_meta,
  meta_too_large,
  frame_too_large
};

const char* decode_error_message(DecodeError error);
// True for errors about size limits (reported as resource_exhausted, not protocol_error).
bool is_limit_error(DecodeError error);

class FrameDecoder {
 public:
  explicit FrameDecoder(FrameLimits limits) : limits_(limits) {}

  // Consumes bytes from `input` until one frame completes, the input is exhausted, or an
  // error occurs. Returns the number of bytes consumed. When a frame completed,
  // has_frame() is true until take_frame().
  std::size_t feed(std::span<const std::byte> input);

  bool has_frame() const { return state_ == State::complete; }
  WireFrame take_frame();

  DecodeError error() const { return error_; }
  // Request id of the frame being decoded, once its header has been read (0 before).
  std::uint64_t current_request_id() const { return frame_.header.request_id; }

  // While reading a payload: the bytes still missing, so a caller may read a large payload
  // straight into place and then call commit_payload(n) for the n bytes it wrote there.
  // Empty when not reading a payload. Valid until the next call on this decoder.
  std::span<std::byte> payload_destination();
  void commit_payload(std::size_t n);

  // Whether the decoder sits between frames (no partial frame buffered).
  bool idle() const { return state_ == State::header && header_filled_ == 0; }

  // Replaces the limits; they apply from the next header on (a frame being decoded keeps
  // the limits its header was checked against).
  void set_limits(FrameLimits limits) { limits_ = limits; }

 private:
  enum class State { header, meta, payload, complete, failed };
  void parse_header();
  void finish_payload_if_done();

  FrameLimits limits_;
  State state_ = State::header;
  DecodeError error_ = DecodeError::none;
  std::array<std::byte, kHeaderBytes> header_bytes_{};
  std::size_t header_filled_ = 0;
  std::size_t payload_filled_ = 0;
  WireFrame frame_;
};

}  // namespace replayd::service
