#include "replayd_client/wire/wire_frame_codec.h"

#include <bit>
#include <cstring>

namespace replayd::client {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the replayd client writes integers in host order, so it needs a little-endian host");

constexpr std::array<std::byte, 4> kMagic{std::byte{'R'}, std::byte{'P'}, std::byte{'L'},
                                          std::byte{'Y'}};

template <typename T>
void store(std::byte* at, T value) {
  std::memcpy(at, &value, sizeof(T));
}

template <typename T>
T load(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace

HeaderBytes encode_request_header(const FrameHeader& header) {
  HeaderBytes bytes{};
  std::memcpy(bytes.data(), kMagic.data(), kMagic.size());
  bytes[4] = std::byte{kProtocolVersion};
  bytes[5] = std::byte{kRequestKind};
  store<std::uint64_t>(bytes.data() + 8, header.request_id);
  store<std::uint32_t>(bytes.data() + 16, header.meta_bytes);
  store<std::uint64_t>(bytes.data() + 24, header.payload_bytes);
  return bytes;
}

std::string decode_reply_header(std::span<const std::byte, kHeaderBytes> bytes, FrameHeader& out) {
  const std::byte* p = bytes.data();
  if (std::memcmp(p, kMagic.data(), kMagic.size()) != 0) return "bad magic in a reply header";
  if (p[4] != std::byte{kProtocolVersion}) {
    return "reply header has protocol version " + std::to_string(static_cast<int>(p[4])) +
           ", this client speaks 1";
  }
  if (p[5] != std::byte{kReplyKind}) return "reply header kind is not 2 (reply)";
  if (load<std::uint16_t>(p + 6) != 0) return "reply header flags are not 0";
  if (load<std::uint32_t>(p + 20) != 0) return "reply header reserved bytes are not 0";
  out.request_id = load<std::uint64_t>(p + 8);
  out.meta_bytes = load<std::uint32_t>(p + 16);
  out.payload_bytes = load<std::uint64_t>(p + 24);
  if (out.meta_bytes == 0) return "reply header has meta_bytes 0";
  return {};
}

}  // namespace replayd::client
