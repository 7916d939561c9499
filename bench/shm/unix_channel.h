// Blocking Unix-socket helpers for the prototype: a socket pair with large buffers, exact
// reads and writes (partial transfers resumed, EINTR retried), gathered writes, a buffered
// reader that takes whatever the socket holds in one call, and file descriptors passed with
// SCM_RIGHTS. Each function throws std::runtime_error naming the failed call.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace replayd::shm_proto {

// A connected AF_UNIX stream pair whose send and receive buffers are `buffer_bytes`.
std::pair<int, int> make_socket_pair(int buffer_bytes);

void write_all(int fd, const void* data, std::size_t bytes);
// Writes every byte the iovecs describe; `iov` is modified while partial writes resume.
void writev_all(int fd, std::span<iovec> iov);

// Sends `fds` with one byte of data; the receiver gets new descriptors for the same files.
void send_fds(int sock, std::span<const int> fds);
// Receives exactly `count` descriptors sent by send_fds.
std::vector<int> recv_fds(int sock, std::size_t count);

// Reads a stream through a buffer of `buffer_bytes`: a pipelining peer's small messages
// arrive several per read() call. Reads at least as large as the buffer go straight to the
// destination once the buffer is drained (so a large reply is copied once, by the kernel,
// except what the read of its header took along). Owns no descriptor.
class BufferedReader {
 public:
  BufferedReader(int fd, std::size_t buffer_bytes);
  // Fills `bytes` bytes of `out`. Returns false on end of stream before the first byte;
  // throws on an error or an end of stream mid-read.
  bool read(void* out, std::size_t bytes);
  // The next `bytes` bytes (at most the buffer's size), in the buffer: no copy out. Returns
  // null on end of stream before the first byte; throws on an error or a cut message. The
  // pointer is valid until the next call.
  const std::byte* view(std::size_t bytes);

 private:
  int fd_;
  std::vector<std::byte> buffer_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

}  // namespace replayd::shm_proto
