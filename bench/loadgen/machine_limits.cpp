#include "machine_limits.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "latency_histogram.h"

namespace replayd::loadgen {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kStreamChunkBytes = 1 << 20;
constexpr std::size_t kMemcpyBytes = 64 << 20;
constexpr std::size_t kPingBytes = 64;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool write_all(int fd, const char* data, std::size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::write(fd, data, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

bool read_all(int fd, char* data, std::size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::read(fd, data, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

void reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

double measure_memcpy(double seconds) {
  std::vector<char> from(kMemcpyBytes, 1), to(kMemcpyBytes, 0);
  std::size_t copied = 0;
  const auto start = Clock::now();
  do {
    std::memcpy(to.data(), from.data(), kMemcpyBytes);
    from[copied % kMemcpyBytes] = to[(copied + 7) % kMemcpyBytes];  // keeps the copy live
    copied += kMemcpyBytes;
  } while (seconds_since(start) < seconds);
  return static_cast<double>(copied) / seconds_since(start) / 1e9;
}

// Forks a writer that sends 1 MiB writes on `write_fd` for `seconds`; this process reads
// `read_fd` until EOF. Returns received bytes per second (1e9).
double measure_stream(int read_fd, int write_fd, double seconds) {
  const pid_t pid = ::fork();
  check(pid >= 0, "fork");
  if (pid == 0) {
    ::close(read_fd);
    std::vector<char> chunk(kStreamChunkBytes, 'x');
    const auto start = Clock::now();
    while (seconds_since(start) < seconds && write_all(write_fd, chunk.data(), chunk.size())) {
    }
    ::close(write_fd);
    ::_exit(0);
  }
  ::close(write_fd);
  std::vector<char> chunk(kStreamChunkBytes);
  std::size_t received = 0;
  const auto start = Clock::now();
  while (true) {
    const ssize_t n = ::read(read_fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    received += static_cast<std::size_t>(n);
  }
  const double elapsed = seconds_since(start);
  ::close(read_fd);
  reap(pid);
  return static_cast<double>(received) / elapsed / 1e9;
}

double measure_unix_stream(double seconds) {
  int fds[2];
  check(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0, "socketpair");
  return measure_stream(fds[0], fds[1], seconds);
}

double measure_tcp_stream(double seconds) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  check(listener >= 0, "socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  check(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0, "bind");
  check(::listen(listener, 1) == 0, "listen");
  check(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0,
        "getsockname");
  const int sender = ::socket(AF_INET, SOCK_STREAM, 0);
  check(sender >= 0, "socket");
  check(::connect(sender, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0, "connect");
  const int receiver = ::accept(listener, nullptr, nullptr);
  check(receiver >= 0, "accept");
  ::close(listener);
  return measure_stream(receiver, sender, seconds);
}

void measure_ping_pong(double seconds, MachineLimits& limits) {
  int fds[2];
  check(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0, "socketpair");
  const pid_t pid = ::fork();
  check(pid >= 0, "fork");
  char message[kPingBytes] = {};
  if (pid == 0) {
    ::close(fds[0]);
    while (read_all(fds[1], message, kPingBytes) && write_all(fds[1], message, kPingBytes)) {
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  LatencyHistogram rtt;
  const auto start = Clock::now();
  while (seconds_since(start) < seconds) {
    const auto sent = Clock::now();
    if (!write_all(fds[0], message, kPingBytes) || !read_all(fds[0], message, kPingBytes)) break;
    rtt.record(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - sent).count()));
  }
  ::close(fds[0]);
  reap(pid);
  limits.unix_rtt_us_p50 = rtt.quantile_us(0.5);
  limits.unix_rtt_us_p99 = rtt.quantile_us(0.99);
}

}  // namespace

MachineLimits measure_machine_limits(double seconds_each) {
  MachineLimits limits;
  limits.memcpy_gb_s = measure_memcpy(seconds_each);
  limits.unix_socket_gb_s = measure_unix_stream(seconds_each);
  limits.tcp_loopback_gb_s = measure_tcp_stream(seconds_each);
  measure_ping_pong(seconds_each, limits);
  return limits;
}

}  // namespace replayd::loadgen
