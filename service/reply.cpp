#include "service/reply.h"

#include <boost/json.hpp>

namespace replayd::service {

const char* wire_error_name(WireError code) {
  switch (code) {
    case WireError::invalid_argument: return "invalid_argument";
    case WireError::not_found: return "not_found";
    case WireError::already_exists: return "already_exists";
    case WireError::timeout: return "timeout";
    case WireError::resource_exhausted: return "resource_exhausted";
    case WireError::shutting_down: return "shutting_down";
    case WireError::protocol_error: return "protocol_error";
    case WireError::unauthenticated: return "unauthenticated";
  }
  return "invalid_argument";
}

WireError wire_error_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return WireError::invalid_argument;
    case ErrorCode::not_found: return WireError::not_found;
    case ErrorCode::already_exists: return WireError::already_exists;
    case ErrorCode::would_block: return WireError::timeout;
    case ErrorCode::resource_exhausted: return WireError::resource_exhausted;
    case ErrorCode::failed_precondition: return WireError::invalid_argument;
  }
  return WireError::invalid_argument;
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
  Reply reply =
      make_reply(request_id, boost::json::serialize(boost::json::object{{"error", std::move(error)}}));
  reply.is_error = true;
  reply.error_code = wire_error_name(code);
  return reply;
}

Reply make_error_reply(std::uint64_t request_id, const Error& error) {
  return make_error_reply(request_id, wire_error_of(error.code), error.message);
}

}  // namespace replayd::service
