#include "service/health_probe.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

#include "service/config.h"

namespace replayd::service {
namespace {

struct Url {
  std::string host_port;
  std::string path;
};

bool split_url(std::string_view url, Url& out) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) return false;
  url.remove_prefix(kScheme.size());
  const auto slash = url.find('/');
  out.host_port = std::string(url.substr(0, slash));
  out.path = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
  return !out.host_port.empty();
}

// A connected socket with send/receive deadlines, or -1 with `error` set.
int connect_to(const HostPort& target, std::chrono::milliseconds timeout, std::string& error) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(target.port);
  if (int rc = ::getaddrinfo(target.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    error = "cannot resolve '" + target.host + "': " + ::gai_strerror(rc);
    return -1;
  }
  timeval deadline{static_cast<time_t>(timeout.count() / 1000),
                   static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &deadline, sizeof deadline);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &deadline, sizeof deadline);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      error = std::string("connect: ") + std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

ProbeResult probe_http(std::string_view url, std::chrono::milliseconds timeout) {
  Url parts;
  if (!split_url(url, parts))
    return {false, "expected http://HOST:PORT/PATH, got '" + std::string(url) + "'"};
  auto target = parse_host_port(parts.host_port);
  if (!target) return {false, target.error().message};
  std::string error;
  const int fd = connect_to(*target, timeout, error);
  if (fd < 0) return {false, error};
  const std::string request =
      "GET " + parts.path + " HTTP/1.0\r\nHost: " + parts.host_port + "\r\n\r\n";
  std::string reply;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    char buffer[512];
    while (reply.find("\r\n") == std::string::npos && reply.size() < 4096) {
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      reply.append(buffer, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  const std::string status_line = reply.substr(0, reply.find("\r\n"));
  if (status_line.empty()) return {false, "no HTTP answer from " + parts.host_port};
  const bool ok = status_line.starts_with("HTTP/1.") && status_line.size() >= 12 &&
                  status_line.compare(9, 3, "200") == 0;
  return {ok, status_line};
}

}  // namespace replayd::service
