#include "service/protocol/reply.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cstring>

namespace replayd::service {

const char* wire_error_name(WireError code) {
  switch (code) {
    case WireError::invalid_argument:
      return "invalid_argument";
    case WireError::not_found:
      return "not_found";
    case WireError::already_exists:
      return "already_exists";
    case WireError::timeout:
      return "timeout";
    case WireError::resource_exhausted:
      return "resource_exhausted";
    case WireError::shutting_down:
      return "shutting_down";
    case WireError::protocol_error:
      return "protocol_error";
    case WireError::unauthenticated:
      return "unauthenticated";
    case WireError::permission_denied:
      return "permission_denied";
  }
  return "invalid_argument";
}

WireError wire_error_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument:
      return WireError::invalid_argument;
    case ErrorCode::not_found:
      return WireError::not_found;
    case ErrorCode::already_exists:
      return WireError::already_exists;
    case ErrorCode::would_block:
      return WireError::timeout;
    case ErrorCode::resource_exhausted:
      return WireError::resource_exhausted;
    case ErrorCode::failed_precondition:
      return WireError::invalid_argument;
    case ErrorCode::unavailable:
      return WireError::shutting_down;
    case ErrorCode::permission_denied:
      return WireError::permission_denied;
  }
  return WireError::invalid_argument;
}

std::size_t Reply::payload_bytes() const {
  if (pieces.empty()) return payload.size();
  std::size_t bytes = 0;
  for (const auto& piece : pieces)
    bytes += piece.size();
  return bytes;
}

void Reply::gather(std::vector<asio::const_buffer>& out) const {
  if (!remainder_only) {
    out.emplace_back(header.data(), header.size());
    out.emplace_back(meta.data(), meta.size());
  }
  if (pieces.empty()) {
    if (!payload.empty()) out.emplace_back(payload.data(), payload.size());
    return;
  }
  for (const auto& piece : pieces)
    out.emplace_back(piece.data(), piece.size());
}

void Reply::settle(std::size_t written) {
  if (written == 0) {
    if (pieces.empty()) return;  // owns every byte already
    ByteBuffer owned(payload_bytes());
    std::byte* out = owned.data();
    for (const auto& piece : pieces) {
      std::memcpy(out, piece.data(), piece.size());
      out += piece.size();
    }
    pieces.clear();
    payload = std::move(owned);
    return;
  }
  // After a partial write, the unwritten rest of the frame becomes the payload.
  std::vector<asio::const_buffer> frame;
  gather(frame);
  ByteBuffer rest(wire_bytes() - written);
  std::byte* out = rest.data();
  for (const auto& buffer : frame) {
    const std::size_t skipped = std::min(written, buffer.size());
    written -= skipped;
    std::memcpy(out, static_cast<const std::byte*>(buffer.data()) + skipped,
                buffer.size() - skipped);
    out += buffer.size() - skipped;
  }
  pieces.clear();
  payload = std::move(rest);
  remainder_only = true;
}

Reply make_reply(std::uint64_t request_id, std::string meta, ByteBuffer payload) {
  Reply reply;
  reply.request_id = request_id;
  reply.meta = std::move(meta);
  reply.payload = std::move(payload);
  encode_header(FrameHeader{FrameKind::reply, request_id,
                            static_cast<std::uint32_t>(reply.meta.size()), reply.payload.size()},
                reply.header);
  return reply;
}

Reply make_error_reply(std::uint64_t request_id, WireError code, std::string_view message) {
  boost::json::object error{{"code", wire_error_name(code)}, {"message", message}};
  Reply reply = make_reply(
      request_id, boost::json::serialize(boost::json::object{{"error", std::move(error)}}));
  reply.is_error = true;
  reply.error_code = wire_error_name(code);
  return reply;
}

Reply make_error_reply(std::uint64_t request_id, const Error& error) {
  return make_error_reply(request_id, wire_error_of(error.code), error.message);
}

}  // namespace replayd::service
