// Tests of service/protocol/reply.h: reply frames as they go on the wire, error replies, and replies
// that borrow table rows (settled by a copy when the socket cannot take them at once).
#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "service/protocol/reply.h"

using namespace replayd::service;

namespace {

std::string wire_bytes(const Reply& reply) {
  std::vector<asio::const_buffer> buffers;
  reply.gather(buffers);
  std::string bytes;
  for (const auto& buffer : buffers)
    bytes.append(static_cast<const char*>(buffer.data()), buffer.size());
  return bytes;
}

}  // namespace

TEST_CASE("a reply frame carries its id, metadata and payload lengths") {
  ByteBuffer payload(5);
  std::memcpy(payload.data(), "abcde", 5);
  const Reply reply = make_reply(77, "{\"n\":1}", std::move(payload));
  const std::string bytes = wire_bytes(reply);
  REQUIRE(bytes.size() == kHeaderBytes + 7 + 5);
  CHECK(bytes.substr(0, 4) == "RPLY");
  CHECK(bytes[5] == 2);  // kind: reply
  std::uint64_t id = 0;
  std::uint32_t meta_bytes = 0;
  std::uint64_t payload_bytes = 0;
  std::memcpy(&id, bytes.data() + 8, 8);
  std::memcpy(&meta_bytes, bytes.data() + 16, 4);
  std::memcpy(&payload_bytes, bytes.data() + 24, 8);
  CHECK(id == 77);
  CHECK(meta_bytes == 7);
  CHECK(payload_bytes == 5);
  CHECK(bytes.substr(kHeaderBytes) == "{\"n\":1}abcde");
  CHECK(reply.wire_bytes() == bytes.size());
}

TEST_CASE("an error reply is exactly code and message, with no payload") {
  const Reply reply = make_error_reply(3, WireError::not_found, "table 'x' does not exist");
  CHECK(reply.is_error);
  CHECK(reply.error_code == "not_found");
  CHECK(reply.meta == R"({"error":{"code":"not_found","message":"table 'x' does not exist"}})");
  CHECK(reply.payload.size() == 0);
}

TEST_CASE("every engine error maps to one wire code") {
  CHECK(wire_error_of(replayd::ErrorCode::invalid_argument) == WireError::invalid_argument);
  CHECK(wire_error_of(replayd::ErrorCode::not_found) == WireError::not_found);
  CHECK(wire_error_of(replayd::ErrorCode::already_exists) == WireError::already_exists);
  CHECK(wire_error_of(replayd::ErrorCode::would_block) == WireError::timeout);
  CHECK(wire_error_of(replayd::ErrorCode::resource_exhausted) == WireError::resource_exhausted);
  CHECK(wire_error_of(replayd::ErrorCode::failed_precondition) == WireError::invalid_argument);
  std::set<std::string> names;
  for (WireError code : kWireErrors)
    names.insert(wire_error_name(code));
  CHECK(names.size() == kWireErrors.size());
}

TEST_CASE("a reply that borrows rows keeps its bytes after settling, whatever was written") {
  std::string row_a = "AAAAAAAA", row_b = "BBBB";
  auto borrowed = [&] {
    Reply reply = make_reply(1, "{}", ByteBuffer(3));
    std::memcpy(reply.payload.data(), "xyz", 3);
    reply.pieces = {{reply.payload.data(), 3},
                    {reinterpret_cast<const std::byte*>(row_a.data()), row_a.size()},
                    {reinterpret_cast<const std::byte*>(row_b.data()), row_b.size()}};
    encode_header(FrameHeader{FrameKind::reply, 1, 2, reply.payload_bytes()}, reply.header);
    return reply;
  };
  const std::string expected = wire_bytes(borrowed());
  REQUIRE(expected.size() == kHeaderBytes + 2 + 15);
  for (std::size_t written = 0; written < expected.size(); ++written) {
    Reply reply = borrowed();
    reply.settle(written);
    row_a = "--------";  // the table overwrote the rows
    const std::string rest = wire_bytes(reply);
    CHECK(rest == expected.substr(written));
    CHECK_FALSE(reply.borrows());
    row_a = "AAAAAAAA";
  }
}
