#include "unix_channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

namespace replayd::shm_proto {
namespace {

[[noreturn]] void fail(const char* call) {
  throw std::runtime_error(std::string(call) + ": " + std::strerror(errno));
}

}  // namespace

std::pair<int, int> make_socket_pair(int buffer_bytes) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) fail("socketpair");
  for (int fd : fds) {
    if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes) != 0 ||
        ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes) != 0)
      fail("setsockopt");
  }
  return {fds[0], fds[1]};
}

void write_all(int fd, const void* data, std::size_t bytes) {
  iovec one{const_cast<void*>(data), bytes};
  writev_all(fd, std::span<iovec>(&one, 1));
}

void writev_all(int fd, std::span<iovec> iov) {
  std::size_t first = 0;
  while (first < iov.size()) {
    const int count = static_cast<int>(std::min<std::size_t>(iov.size() - first, IOV_MAX));
    const ssize_t written = ::writev(fd, iov.data() + first, count);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail("writev");
    }
    auto left = static_cast<std::size_t>(written);
    while (first < iov.size() && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
}

void send_fds(int sock, std::span<const int> fds) {
  char byte = 'F';
  iovec data{&byte, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  if (::sendmsg(sock, &message, 0) != 1) fail("sendmsg(SCM_RIGHTS)");
}

std::vector<int> recv_fds(int sock, std::size_t count) {
  char byte = 0;
  iovec data{&byte, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * count));
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  if (::recvmsg(sock, &message, MSG_CMSG_CLOEXEC) != 1) fail("recvmsg(SCM_RIGHTS)");
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  if (header == nullptr || header->cmsg_type != SCM_RIGHTS ||
      header->cmsg_len != CMSG_LEN(sizeof(int) * count))
    throw std::runtime_error("recvmsg: expected " + std::to_string(count) + " descriptors");
  std::vector<int> fds(count);
  std::memcpy(fds.data(), CMSG_DATA(header), sizeof(int) * count);
  return fds;
}

BufferedReader::BufferedReader(int fd, std::size_t buffer_bytes)
    : fd_(fd), buffer_(buffer_bytes) {}

bool BufferedReader::read(void* out, std::size_t bytes) {
  auto* to = static_cast<std::byte*>(out);
  bool started = false;
  while (bytes > 0) {
    if (begin_ == end_) {
      // Drained: a large remainder goes straight to its destination.
      void* into = bytes >= buffer_.size() ? static_cast<void*>(to) : buffer_.data();
      const std::size_t room = bytes >= buffer_.size() ? bytes : buffer_.size();
      const ssize_t got = ::read(fd_, into, room);
      if (got < 0) {
        if (errno == EINTR) continue;
        fail("read");
      }
      if (got == 0) {
        if (!started) return false;
        throw std::runtime_error("read: end of stream inside a message");
      }
      started = true;
      if (into == to) {
        to += got;
        bytes -= static_cast<std::size_t>(got);
        continue;
      }
      begin_ = 0;
      end_ = static_cast<std::size_t>(got);
    }
    const std::size_t take = std::min(bytes, end_ - begin_);
    std::memcpy(to, buffer_.data() + begin_, take);
    begin_ += take;
    to += take;
    bytes -= take;
    started = true;
  }
  return true;
}

const std::byte* BufferedReader::view(std::size_t bytes) {
  if (bytes > buffer_.size()) throw std::runtime_error("view: larger than the read buffer");
  if (end_ - begin_ < bytes) {
    // Keep what is buffered at the front, then read until the message is whole.
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
    while (end_ < bytes) {
      const ssize_t got = ::read(fd_, buffer_.data() + end_, buffer_.size() - end_);
      if (got < 0) {
        if (errno == EINTR) continue;
        fail("read");
      }
      if (got == 0) {
        if (end_ == 0) return nullptr;
        throw std::runtime_error("read: end of stream inside a message");
      }
      end_ += static_cast<std::size_t>(got);
    }
  }
  const std::byte* at = buffer_.data() + begin_;
  begin_ += bytes;
  return at;
}

}  // namespace replayd::shm_proto
