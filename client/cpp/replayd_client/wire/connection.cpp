#include "replayd_client/wire/connection.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>

namespace replayd::client {
namespace {

constexpr std::size_t kReadBufferBytes = 64 << 10;
// Replies whose payload is at least this large (after the buffered part) are read straight
// into their own buffer instead of through the read buffer.
constexpr std::size_t kDirectReadBytes = 16 << 10;
// Sanity limits on what a reply header may announce, checked before allocating.
constexpr std::uint32_t kMaxReplyMetaBytes = 64 << 20;
constexpr std::uint64_t kMaxReplyPayloadBytes = std::uint64_t{1} << 40;
constexpr std::size_t kMaxIovecs = 64;
// SO_SNDBUF of the socket (the kernel caps it at net.core.wmem_max): whole insert batches fit,
// so the server reads them in large pieces and an explorer keeps its share of the server
// next to a learner receiving large samples.
constexpr int kSendBufferBytes = 4 << 20;
// Zero bytes for column padding; a piece never needs more than 7.
constexpr std::array<std::byte, 8> kZeros{};

std::string system_error_text(int error) {
  return std::strerror(error);
}

[[noreturn]] void connect_failed(const Address& address, const std::string& why) {
  throw Error(ErrorCode::connection_lost, "cannot connect to " + address.to_string() + ": " + why);
}

int connect_unix(const Address& address) {
  sockaddr_un target{};
  target.sun_family = AF_UNIX;
  if (address.path.size() >= sizeof(target.sun_path)) {
    connect_failed(address, "socket path longer than " +
                                std::to_string(sizeof(target.sun_path) - 1) + " bytes");
  }
  std::memcpy(target.sun_path, address.path.c_str(), address.path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) connect_failed(address, system_error_text(errno));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) != 0) {
    const int error = errno;
    ::close(fd);
    connect_failed(address, system_error_text(error));
  }
  return fd;
}

int connect_tcp(const Address& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  if (const int rc = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    connect_failed(address, ::gai_strerror(rc));
  }
  int last_error = 0;
  int fd = -1;
  for (addrinfo* candidate = found; candidate && fd < 0; candidate = candidate->ai_next) {
    fd = ::socket(candidate->ai_family, candidate->ai_socktype | SOCK_CLOEXEC,
                  candidate->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      continue;
    }
    if (::connect(fd, candidate->ai_addr, candidate->ai_addrlen) != 0) {
      last_error = errno;
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) connect_failed(address, system_error_text(last_error));
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  return fd;
}

// Writes every byte of `pieces` with as few sendmsg calls as the kernel allows. Returns 0
// or the errno that stopped it.
int write_all(int fd, std::span<const PayloadPiece> pieces) {
  std::size_t piece = 0;
  std::size_t offset = 0;  // bytes of pieces[piece] already written
  while (piece < pieces.size()) {
    std::array<iovec, kMaxIovecs> iov;
    std::size_t count = 0;
    for (std::size_t i = piece; i < pieces.size() && count < kMaxIovecs; ++i) {
      const std::size_t skip = i == piece ? offset : 0;
      if (pieces[i].size() == skip) continue;
      iov[count++] = {const_cast<std::byte*>(pieces[i].data() + skip), pieces[i].size() - skip};
    }
    if (count == 0) break;
    msghdr message{};
    message.msg_iov = iov.data();
    message.msg_iovlen = count;
    const ssize_t sent = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    // Advance past what was written.
    auto left = static_cast<std::size_t>(sent);
    while (piece < pieces.size()) {
      const std::size_t rest = pieces[piece].size() - offset;
      if (left < rest) {
        offset += left;
        break;
      }
      left -= rest;
      ++piece;
      offset = 0;
    }
  }
  return 0;
}

}  // namespace

Connection::Connection(const Address& address, std::size_t max_in_flight)
    : address_(address),
      fd_(address.kind == Address::Kind::unix_socket ? connect_unix(address)
                                                     : connect_tcp(address)),
      calls_(max_in_flight),
      read_buffer_(new std::byte[kReadBufferBytes]) {
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &kSendBufferBytes, sizeof(kSendBufferBytes));
  reader_ = std::thread([this] { read_loop(); });
}

Connection::~Connection() {
  close();
  if (reader_.joinable()) reader_.join();
  ::close(fd_);
  for (int fd : descriptors_)
    ::close(fd);
}

int Connection::take_descriptor() {
  std::lock_guard lock(descriptors_mutex_);
  if (descriptors_.empty()) return -1;
  const int fd = descriptors_.front();
  descriptors_.pop_front();
  return fd;
}

ssize_t Connection::receive(std::byte* out, std::size_t bytes) {
  iovec piece{out, bytes};
  alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))];
  msghdr message{};
  message.msg_iov = &piece;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  const ssize_t n = ::recvmsg(fd_, &message, MSG_CMSG_CLOEXEC);
  if (n > 0 && message.msg_controllen > 0) {
    std::lock_guard lock(descriptors_mutex_);
    for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
         header = CMSG_NXTHDR(&message, header)) {
      if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
        descriptors_.push_back(fd);
      }
    }
  }
  return n;
}

void Connection::close() {
  if (closed_.exchange(true, std::memory_order_acq_rel)) return;
  // Wakes the reader (recv returns 0) and any writer blocked on a full socket.
  ::shutdown(fd_, SHUT_RDWR);
}

void Connection::check_meta_size(std::size_t meta_bytes) {
  if (meta_bytes == 0 || meta_bytes > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(ErrorCode::invalid_argument,
                "request metadata of " + std::to_string(meta_bytes) + " bytes cannot be framed");
  }
}

void Connection::send(std::uint64_t request_id, std::string_view meta,
                      std::span<const PayloadPiece> payload) {
  FrameHeader header;
  header.request_id = request_id;
  header.meta_bytes = static_cast<std::uint32_t>(meta.size());
  for (const auto& piece : payload)
    header.payload_bytes += piece.size();
  const HeaderBytes header_bytes = encode_request_header(header);

  std::array<PayloadPiece, kMaxIovecs> small;
  std::vector<PayloadPiece> large;
  std::span<PayloadPiece> pieces;
  const std::size_t count = payload.size() + 2;
  if (count <= small.size()) {
    pieces = {small.data(), count};
  } else {
    large.resize(count);
    pieces = large;
  }
  pieces[0] = header_bytes;
  pieces[1] = std::as_bytes(std::span(meta.data(), meta.size()));
  std::copy(payload.begin(), payload.end(), pieces.begin() + 2);

  int error = 0;
  {
    std::lock_guard lock(write_mutex_);
    error = write_all(fd_, pieces);
  }
  if (error != 0) {
    // The reader sees the shutdown and fails this call with the others.
    close();
  }
}

bool Connection::read_exact(std::byte* out, std::size_t bytes) {
  if (bytes == 0) return true;
  const std::size_t buffered = std::min(bytes, read_end_ - read_begin_);
  std::memcpy(out, read_buffer_.get() + read_begin_, buffered);
  read_begin_ += buffered;
  out += buffered;
  bytes -= buffered;
  while (bytes > 0) {
    if (bytes >= kDirectReadBytes) {
      const ssize_t n = receive(out, bytes);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      out += n;
      bytes -= static_cast<std::size_t>(n);
      continue;
    }
    const ssize_t n = receive(read_buffer_.get(), kReadBufferBytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    read_begin_ = 0;
    read_end_ = static_cast<std::size_t>(n);
    const std::size_t take = std::min(bytes, read_end_);
    std::memcpy(out, read_buffer_.get(), take);
    read_begin_ = take;
    out += take;
    bytes -= take;
  }
  return true;
}

void Connection::read_loop() {
  ReplyDecoder decoder;
  std::string why = "the server closed the connection";
  try {
    while (true) {
      HeaderBytes header_bytes;
      if (!read_exact(header_bytes.data(), header_bytes.size())) break;
      FrameHeader header;
      if (std::string bad = decode_reply_header(header_bytes, header); !bad.empty()) {
        why = "reply does not follow the protocol: " + bad;
        break;
      }
      if (header.meta_bytes > kMaxReplyMetaBytes || header.payload_bytes > kMaxReplyPayloadBytes) {
        why = "reply header announces an implausible size";
        break;
      }
      Reply reply;
      reply.request_id = header.request_id;
      reply.meta.resize(header.meta_bytes);
      if (!read_exact(reinterpret_cast<std::byte*>(reply.meta.data()), header.meta_bytes)) break;
      reply.payload = Buffer(header.payload_bytes);
      if (!read_exact(reply.payload.data(), header.payload_bytes)) break;
      if (!calls_.complete(std::move(reply), decoder)) {
        why =
            "reply to request id " + std::to_string(header.request_id) + ", which is not in flight";
        break;
      }
    }
  } catch (const std::exception& e) {
    why = std::string("reading replies failed: ") + e.what();
  }
  if (closed_.load(std::memory_order_acquire)) why = "the connection was closed";
  close();
  calls_.close(Error(ErrorCode::connection_lost, address_.to_string() + ": " + why));
}

}  // namespace replayd::client
