// Tests of service/protocol/wire_frame.h: the incremental request decoder, fed whole, byte by byte
// and in random splits, and every way a header can be wrong.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "service/protocol/wire_frame.h"

using namespace replayd::service;

namespace {

std::vector<std::byte> request_frame(std::uint64_t id, std::string_view meta,
                                     std::size_t payload_bytes, std::uint8_t fill) {
  std::vector<std::byte> bytes(kHeaderBytes + meta.size() + payload_bytes);
  encode_header(
      FrameHeader{FrameKind::request, id, static_cast<std::uint32_t>(meta.size()), payload_bytes},
      std::span<std::byte, kHeaderBytes>(bytes.data(), kHeaderBytes));
  std::memcpy(bytes.data() + kHeaderBytes, meta.data(), meta.size());
  std::memset(bytes.data() + kHeaderBytes + meta.size(), fill, payload_bytes);
  return bytes;
}

// Feeds `stream` in pieces whose sizes `next_piece` picks; returns every decoded frame.
template <typename NextPiece>
std::vector<WireFrame> decode_all(FrameDecoder& decoder, std::span<const std::byte> stream,
                                  NextPiece next_piece) {
  std::vector<WireFrame> frames;
  while (!stream.empty()) {
    auto piece = stream.first(std::min(stream.size(), next_piece()));
    stream = stream.subspan(piece.size());
    while (!piece.empty()) {
      piece = piece.subspan(decoder.feed(piece));
      if (decoder.has_frame()) frames.push_back(decoder.take_frame());
      REQUIRE(decoder.error() == DecodeError::none);
    }
  }
  return frames;
}

std::vector<std::byte> three_frames() {
  std::vector<std::byte> stream;
  for (auto frame : {request_frame(1, R"({"op":"ping"})", 0, 0),
                     request_frame(2, R"({"op":"insert"})", 1000, 0xab),
                     request_frame(3, R"({"op":"delete"})", 24, 0x5c)}) {
    stream.insert(stream.end(), frame.begin(), frame.end());
  }
  return stream;
}

void check_three(const std::vector<WireFrame>& frames) {
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].header.request_id == 1);
  CHECK(frames[0].meta == R"({"op":"ping"})");
  CHECK(frames[0].payload.size() == 0);
  CHECK(frames[1].header.request_id == 2);
  REQUIRE(frames[1].payload.size() == 1000);
  CHECK(frames[1].payload.data()[999] == std::byte{0xab});
  CHECK(frames[2].meta == R"({"op":"delete"})");
  REQUIRE(frames[2].payload.size() == 24);
  CHECK(frames[2].payload.data()[0] == std::byte{0x5c});
}

}  // namespace

TEST_CASE("frames decode the same whole, byte by byte and in random splits") {
  const auto stream = three_frames();
  {
    FrameDecoder decoder(FrameLimits{});
    check_three(decode_all(decoder, stream, [] { return std::size_t{1} << 30; }));
  }
  {
    FrameDecoder decoder(FrameLimits{});
    check_three(decode_all(decoder, stream, [] { return std::size_t{1}; }));
  }
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    FrameDecoder decoder(FrameLimits{});
    std::uniform_int_distribution<std::size_t> size(1, 80);
    check_three(decode_all(decoder, stream, [&] { return size(random); }));
    CHECK(decoder.idle());
  }
}

TEST_CASE("a large payload can be read straight into the frame") {
  FrameDecoder decoder(FrameLimits{});
  const auto frame = request_frame(9, "{}", 100000, 0x11);
  const std::size_t head = kHeaderBytes + 2 + 10;
  CHECK(decoder.feed(std::span(frame).first(head)) == head);
  auto destination = decoder.payload_destination();
  REQUIRE(destination.size() == 100000 - 10);
  std::memcpy(destination.data(), frame.data() + head, destination.size());
  decoder.commit_payload(destination.size());
  REQUIRE(decoder.has_frame());
  CHECK(decoder.take_frame().payload.data()[99999] == std::byte{0x11});
}

TEST_CASE("every broken header stops the decoder with an error that names it") {
  struct Case {
    const char* name;
    std::size_t offset;
    std::uint8_t value;
    DecodeError expected;
  };
  const Case cases[] = {{"magic", 0, 'X', DecodeError::bad_magic},
                        {"version", 4, 9, DecodeError::bad_version},
                        {"kind", 5, 2, DecodeError::bad_kind},
                        {"flags", 6, 1, DecodeError::bad_flags},
                        {"reserved", 20, 1, DecodeError::bad_reserved}};
  for (const Case& c : cases) {
    SECTION(c.name) {
      auto frame = request_frame(5, "{}", 0, 0);
      frame[c.offset] = std::byte{c.value};
      FrameDecoder decoder(FrameLimits{});
      decoder.feed(frame);
      CHECK(decoder.error() == c.expected);
      CHECK_FALSE(decoder.has_frame());
      CHECK(std::string(decode_error_message(c.expected)).size() > 10);
      CHECK(decoder.feed(frame) == 0);  // nothing more is accepted
    }
  }
}

TEST_CASE("limits are enforced on the header, before the body arrives") {
  SECTION("empty metadata") {
    FrameDecoder decoder(FrameLimits{});
    const auto frame = request_frame(1, "", 0, 0);
    decoder.feed(std::span(frame).first(kHeaderBytes));
    CHECK(decoder.error() == DecodeError::empty_meta);
  }
  SECTION("metadata over max_meta_bytes") {
    FrameDecoder decoder(FrameLimits{1 << 20, 16});
    const auto frame = request_frame(1, std::string(17, ' '), 0, 0);
    decoder.feed(std::span(frame).first(kHeaderBytes));
    CHECK(decoder.error() == DecodeError::meta_too_large);
    CHECK(is_limit_error(decoder.error()));
  }
  SECTION("frame over max_frame_bytes: only the header was read") {
    FrameDecoder decoder(FrameLimits{4096, 1024});
    std::vector<std::byte> header(kHeaderBytes);
    encode_header(FrameHeader{FrameKind::request, 42, 2, std::uint64_t{1} << 40},
                  std::span<std::byte, kHeaderBytes>(header.data(), kHeaderBytes));
    decoder.feed(header);
    CHECK(decoder.error() == DecodeError::frame_too_large);
    CHECK(decoder.current_request_id() == 42);
  }
}
