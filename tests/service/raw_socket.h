// RawSocket: a blocking socket that sends arbitrary bytes to the server and reads reply
// frames, for tests of how the server treats malformed input. RawFrame builds a request
// frame whose every header field may be set wrong on purpose.
// Threading: one test thread per socket.
#pragma once

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace replayd::testing {

struct RawFrame {
  std::string magic = "RPLY";
  std::uint8_t version = 1;
  std::uint8_t kind = 1;
  std::uint16_t flags = 0;
  std::uint64_t request_id = 1;
  std::uint32_t reserved = 0;
  std::string meta = "{\"op\":\"ping\"}";
  std::vector<std::byte> payload;
  std::optional<std::uint32_t> meta_bytes;     // announced length; default meta.size()
  std::optional<std::uint64_t> payload_bytes;  // announced length; default payload.size()

  std::vector<std::byte> bytes() const;
};

struct RawReply {
  std::uint8_t kind = 0;
  std::uint64_t request_id = 0;
  std::string meta;
  std::vector<std::byte> payload;

  boost::json::object json() const;
  // The error code of an error reply, "" for a success.
  std::string error_code() const;
};

class RawSocket {
 public:
  static RawSocket connect_unix(const std::string& path);
  static RawSocket connect_tcp(const std::string& host, int port);
  RawSocket(RawSocket&& other) noexcept : fd_(other.fd_), discarded_bytes_(other.discarded_bytes_) {
    other.fd_ = -1;
  }
  RawSocket& operator=(RawSocket&&) = delete;
  ~RawSocket();

  void send(std::span<const std::byte> bytes);
  void send(const RawFrame& frame) { send(frame.bytes()); }
  // Half-closes the sending side (the server sees EOF after what was sent).
  void shutdown_send();
  // Reads one reply frame. Throws when none arrives within `timeout` or the peer closes.
  RawReply read_reply(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Whether the server closes the connection (EOF or reset) within `timeout`. Bytes read
  // meanwhile are discarded and counted in discarded_bytes().
  bool closed_by_server(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  std::size_t discarded_bytes() const { return discarded_bytes_; }

 private:
  explicit RawSocket(int fd) : fd_(fd) {}
  // Reads exactly `size` bytes; false on EOF/error/timeout.
  bool read_exact(std::byte* out, std::size_t size, std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::size_t discarded_bytes_ = 0;
};

}  // namespace replayd::testing
