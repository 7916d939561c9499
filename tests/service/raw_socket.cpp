#include "raw_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace replayd::testing {
namespace {

template <typename T>
void append(std::vector<std::byte>& out, T value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
T load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

}  // namespace

std::vector<std::byte> RawFrame::bytes() const {
  std::vector<std::byte> out;
  for (char c : magic)
    out.push_back(static_cast<std::byte>(c));
  out.push_back(std::byte{version});
  out.push_back(std::byte{kind});
  append<std::uint16_t>(out, flags);
  append<std::uint64_t>(out, request_id);
  append<std::uint32_t>(out, meta_bytes.value_or(static_cast<std::uint32_t>(meta.size())));
  append<std::uint32_t>(out, reserved);
  append<std::uint64_t>(out, payload_bytes.value_or(payload.size()));
  for (char c : meta)
    out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

boost::json::object RawReply::json() const {
  return boost::json::parse(meta).as_object();
}

std::string RawReply::error_code() const {
  const auto object = json();
  const auto* error = object.if_contains("error");
  if (!error) return "";
  return std::string(error->as_object().at("code").as_string());
}

RawSocket RawSocket::connect_unix(const std::string& path) {
  sockaddr_un target{};
  target.sun_family = AF_UNIX;
  std::strncpy(target.sun_path, path.c_str(), sizeof(target.sun_path) - 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("connect " + path + ": " + why);
  }
  return RawSocket(fd);
}

RawSocket RawSocket::connect_tcp(const std::string& host, int port) {
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &target.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("connect " + host + ": " + why);
  }
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  return RawSocket(fd);
}

RawSocket::~RawSocket() {
  if (fd_ >= 0) ::close(fd_);
}

void RawSocket::send(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

void RawSocket::shutdown_send() {
  ::shutdown(fd_, SHUT_WR);
}

bool RawSocket::read_exact(std::byte* out, std::size_t size,
                           std::chrono::steady_clock::time_point deadline) {
  while (size > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd waiting{fd_, POLLIN, 0};
    if (::poll(&waiting, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::recv(fd_, out, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    out += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

RawReply RawSocket::read_reply(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::byte header[32];
  if (!read_exact(header, sizeof(header), deadline)) {
    throw std::runtime_error("no reply header (timeout or connection closed)");
  }
  if (std::memcmp(header, "RPLY", 4) != 0) throw std::runtime_error("reply without magic");
  RawReply reply;
  reply.kind = static_cast<std::uint8_t>(header[5]);
  reply.request_id = load<std::uint64_t>(header + 8);
  reply.meta.resize(load<std::uint32_t>(header + 16));
  reply.payload.resize(load<std::uint64_t>(header + 24));
  if (!read_exact(reinterpret_cast<std::byte*>(reply.meta.data()), reply.meta.size(), deadline) ||
      !read_exact(reply.payload.data(), reply.payload.size(), deadline)) {
    throw std::runtime_error("reply body incomplete");
  }
  return reply;
}

bool RawSocket::closed_by_server(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::byte sink[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd waiting{fd_, POLLIN, 0};
    if (::poll(&waiting, 1, static_cast<int>(std::max<long>(left.count(), 1))) <= 0) continue;
    const ssize_t n = ::recv(fd_, sink, sizeof(sink), 0);
    if (n == 0) return true;
    if (n < 0 && errno != EINTR) return errno == ECONNRESET;
    if (n > 0) discarded_bytes_ += static_cast<std::size_t>(n);
  }
  return false;
}

}  // namespace replayd::testing
