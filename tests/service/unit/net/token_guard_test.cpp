// Tests of service/net/token_guard.h: a connection that must authenticate gets only small
// frame limits until its first request, which must be hello with the token and no payload.
#include <catch2/catch.hpp>

#include "service/net/token_guard.h"

using namespace replayd::service;
using Catch::Contains;

namespace {

WireFrame request(std::string meta, std::uint64_t payload_bytes = 0) {
  WireFrame frame;
  frame.header.kind = FrameKind::request;
  frame.header.request_id = 1;
  frame.header.meta_bytes = static_cast<std::uint32_t>(meta.size());
  frame.header.payload_bytes = payload_bytes;
  frame.meta = std::move(meta);
  return frame;
}

Limits test_limits() {
  Limits limits;
  limits.max_frame_bytes = 1 << 20;
  limits.max_meta_bytes = 4096;
  return limits;
}

}  // namespace

TEST_CASE("a guard that requires nothing is not pending and applies the full frame limits") {
  TokenGuard guard;
  CHECK_FALSE(guard.pending());
  const FrameLimits limits = guard.frame_limits(test_limits());
  CHECK(limits.max_frame_bytes == 1 << 20);
  CHECK(limits.max_meta_bytes == 4096);
}

TEST_CASE("while the first request is pending only a header and metadata fit in a frame") {
  TokenGuard guard;
  guard.require("secret");
  CHECK(guard.pending());
  const FrameLimits limits = guard.frame_limits(test_limits());
  CHECK(limits.max_frame_bytes == kHeaderBytes + 4096);
  CHECK(limits.max_meta_bytes == 4096);
}

TEST_CASE("hello with the right token ends the guard and restores the full limits") {
  TokenGuard guard;
  guard.require("secret");
  CHECK_FALSE(guard.check(request(R"({"op":"hello","token":"secret"})")).has_value());
  CHECK_FALSE(guard.pending());
  CHECK(guard.frame_limits(test_limits()).max_frame_bytes == 1 << 20);
}

TEST_CASE("a wrong token, another op or a payload is refused and the guard stays pending") {
  TokenGuard guard;
  guard.require("secret");
  const auto wrong = guard.check(request(R"({"op":"hello","token":"guess"})"));
  REQUIRE(wrong.has_value());
  CHECK(wrong->find("secret") == std::string::npos);
  CHECK(wrong->find("guess") == std::string::npos);
  CHECK(guard.pending());
  CHECK(guard.check(request(R"({"op":"ping"})")).has_value());
  CHECK(guard.check(request("not json")).has_value());
  const auto with_payload = guard.check(request(R"({"op":"hello","token":"secret"})", 16));
  REQUIRE(with_payload.has_value());
  CHECK_THAT(*with_payload, Contains("payload"));
  CHECK(guard.pending());
  CHECK(guard.frame_limits(test_limits()).max_frame_bytes == kHeaderBytes + 4096);
}

TEST_CASE("the too-large message says a token is required and the connection is closed") {
  const std::string message(TokenGuard::too_large_message());
  CHECK_THAT(message, Contains("requires a token") && Contains("hello") && Contains("closed"));
}

// Config allows max_frame_bytes 4096 with max_meta_bytes up to 64 MiB.
TEST_CASE("a stranger's first frame may never be larger than an authenticated client's") {
  Limits limits;
  limits.max_frame_bytes = 4096;
  limits.max_meta_bytes = 65536;
  TokenGuard guard;
  guard.require("secret");
  CHECK(guard.frame_limits(limits).max_frame_bytes <= limits.max_frame_bytes);
}
