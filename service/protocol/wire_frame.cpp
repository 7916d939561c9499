#include "service/protocol/wire_frame.h"

#include <algorithm>
#include <cstring>

namespace replayd::service {
namespace {

template <typename T>
T load_le(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));  // the project targets little-endian hosts only
  return value;
}

template <typename T>
void store_le(std::byte* p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

}  // namespace

static_assert(std::endian::native == std::endian::little, "replayd assumes a little-endian host");

void encode_header(const FrameHeader& header, std::span<std::byte, kHeaderBytes> out) {
  std::byte* p = out.data();
  std::memcpy(p, kMagic.data(), kMagic.size());
  p[4] = std::byte{kProtocolVersion};
  p[5] = std::byte{static_cast<std::uint8_t>(header.kind)};
  store_le<std::uint16_t>(p + 6, 0);
  store_le<std::uint64_t>(p + 8, header.request_id);
  store_le<std::uint32_t>(p + 16, header.meta_bytes);
  store_le<std::uint32_t>(p + 20, 0);
  store_le<std::uint64_t>(p + 24, header.payload_bytes);
}

const char* decode_error_message(DecodeError error) {
  switch (error) {
    case DecodeError::none:
      return "no error";
    case DecodeError::bad_magic:
      return "bad magic: a frame must start with the bytes 'RPLY'";
    case DecodeError::bad_version:
      return "unsupported protocol version: this server speaks 1";
    case DecodeError::bad_kind:
      return "bad frame kind: a client must send kind 1 (request)";
    case DecodeError::bad_flags:
      return "bad flags: header bytes 6-7 must be 0";
    case DecodeError::bad_reserved:
      return "bad reserved field: header bytes 20-23 must be 0";
    case DecodeError::empty_meta:
      return "meta_bytes is 0: every frame carries a JSON object";
    case DecodeError::meta_too_large:
      return "meta_bytes exceeds max_meta_bytes";
    case DecodeError::frame_too_large:
      return "frame exceeds max_frame_bytes";
  }
  return "unknown decode error";
}

bool is_limit_error(DecodeError error) {
  return error == DecodeError::meta_too_large || error == DecodeError::frame_too_large;
}

void FrameDecoder::parse_header() {
  const std::byte* p = header_bytes_.data();
  frame_.header.request_id = load_le<std::uint64_t>(p + 8);
  frame_.header.meta_bytes = load_le<std::uint32_t>(p + 16);
  frame_.header.payload_bytes = load_le<std::uint64_t>(p + 24);
  frame_.header.kind = static_cast<FrameKind>(p[5]);
  if (std::memcmp(p, kMagic.data(), kMagic.size()) != 0) {
    error_ = DecodeError::bad_magic;
  } else if (p[4] != std::byte{kProtocolVersion}) {
    error_ = DecodeError::bad_version;
  } else if (p[5] != std::byte{static_cast<std::uint8_t>(FrameKind::request)}) {
    error_ = DecodeError::bad_kind;
  } else if (load_le<std::uint16_t>(p + 6) != 0) {
    error_ = DecodeError::bad_flags;
  } else if (load_le<std::uint32_t>(p + 20) != 0) {
    error_ = DecodeError::bad_reserved;
  } else if (frame_.header.meta_bytes == 0) {
    error_ = DecodeError::empty_meta;
  } else if (frame_.header.meta_bytes > limits_.max_meta_bytes) {
    error_ = DecodeError::meta_too_large;
  } else if (frame_.header.payload_bytes >
             limits_.max_frame_bytes -
                 std::min<std::uint64_t>(limits_.max_frame_bytes,
                                         kHeaderBytes + frame_.header.meta_bytes)) {
    error_ = DecodeError::frame_too_large;
  }
  if (error_ != DecodeError::none) {
    state_ = State::failed;
    return;
  }
  // Limits hold: now it is safe to allocate.
  frame_.meta.clear();
  frame_.meta.reserve(frame_.header.meta_bytes);
  frame_.payload = ByteBuffer(frame_.header.payload_bytes);
  payload_filled_ = 0;
  state_ = State::meta;
}

void FrameDecoder::finish_payload_if_done() {
  if (state_ == State::payload && payload_filled_ == frame_.payload.size()) {
    state_ = State::complete;
  }
}

std::size_t FrameDecoder::feed(std::span<const std::byte> input) {
  std::size_t used = 0;
  while (used < input.size() && state_ != State::complete && state_ != State::failed) {
    const std::span<const std::byte> rest = input.subspan(used);
    if (state_ == State::header) {
      const std::size_t n = std::min(rest.size(), kHeaderBytes - header_filled_);
      std::memcpy(header_bytes_.data() + header_filled_, rest.data(), n);
      header_filled_ += n;
      used += n;
      if (header_filled_ == kHeaderBytes) parse_header();
    } else if (state_ == State::meta) {
      const std::size_t n =
          std::min<std::size_t>(rest.size(), frame_.header.meta_bytes - frame_.meta.size());
      frame_.meta.append(reinterpret_cast<const char*>(rest.data()), n);
      used += n;
      if (frame_.meta.size() == frame_.header.meta_bytes) {
        state_ = State::payload;
        finish_payload_if_done();
      }
    } else if (state_ == State::payload) {
      const std::size_t n = std::min(rest.size(), frame_.payload.size() - payload_filled_);
      std::memcpy(frame_.payload.data() + payload_filled_, rest.data(), n);
      payload_filled_ += n;
      used += n;
      finish_payload_if_done();
    }
  }
  return used;
}

std::span<std::byte> FrameDecoder::payload_destination() {
  if (state_ != State::payload) return {};
  return frame_.payload.span().subspan(payload_filled_);
}

void FrameDecoder::commit_payload(std::size_t n) {
  payload_filled_ += n;
  finish_payload_if_done();
}

WireFrame FrameDecoder::take_frame() {
  WireFrame frame = std::move(frame_);
  frame_ = WireFrame{};
  header_filled_ = 0;
  state_ = State::header;
  return frame;
}

}  // namespace replayd::service
