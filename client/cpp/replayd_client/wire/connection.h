// Connection: one socket to a replayd server, a reader thread that matches replies to
// calls by request id, and gathered writes of requests (header, metadata and the caller's
// payload pieces go out in one sendmsg, never copied into a frame buffer).
// Threading: call() may be used from any number of threads at once; frames never
// interleave (one write mutex). Futures complete on the reader thread. Destroy the
// Connection only when no other thread is inside call().
// Descriptors (the shared-memory plane, docs/SHM.md): replies may carry file descriptors
// (SCM_RIGHTS); the reader keeps them, in arrival order, for take_descriptor().
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <future>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>

#include "replayd_client/address.h"
#include "replayd_client/wire/call_table.h"
#include "replayd_client/wire/wire_frame_codec.h"

namespace replayd::client {

// One piece of a request payload, borrowed until call() returns.
using PayloadPiece = std::span<const std::byte>;

class Connection {
 public:
  // Connects (blocking) and starts the reader thread. Throws Error(connection_lost) naming
  // the address and the system error when the connection cannot be made.
  Connection(const Address& address, std::size_t max_in_flight);
  // close(), then joins the reader.
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends one request and returns the future of its decoded reply. The metadata and payload
  // are fully written to the socket before call() returns (so the caller may reuse them);
  // blocks while max_in_flight calls are outstanding or while the socket is full (flow
  // control). If the connection is or becomes broken, the future holds
  // Error(connection_lost); if it was closed before the call, call() throws it.
  template <typename T, Decoder<T> Decode>
  std::future<T> call(std::string_view meta, std::span<const PayloadPiece> payload) {
    check_meta_size(meta.size());
    auto [id, future] = calls_.start<T, Decode>();
    send(id, meta, payload);
    return std::move(future);
  }

  // Shuts the socket: calls in flight fail with Error(connection_lost). Idempotent,
  // thread-safe, returns at once (the reader thread finishes on its own).
  void close();
  bool is_open() const { return !closed_.load(std::memory_order_acquire); }
  // The oldest descriptor received and not taken yet (the caller owns it), or -1. A reply
  // that announces one has it queued by the time its future is ready.
  int take_descriptor();
  std::size_t in_flight() const { return calls_.in_flight(); }
  const Address& address() const { return address_; }

 private:
  // Writes one frame. On a write error, shuts the socket so the reader fails every call.
  void send(std::uint64_t request_id, std::string_view meta, std::span<const PayloadPiece> payload);
  void read_loop();
  // Throws Error(invalid_argument) for metadata longer than a header can announce.
  static void check_meta_size(std::size_t meta_bytes);
  // Fills `out` from the socket (buffered bytes first). False on EOF or error.
  bool read_exact(std::byte* out, std::size_t bytes);
  // One recvmsg into `out`, keeping the descriptors that come with the bytes.
  ssize_t receive(std::byte* out, std::size_t bytes);

  Address address_;
  int fd_ = -1;
  CallTable calls_;
  std::mutex write_mutex_;
  std::atomic<bool> closed_{false};
  // Reader-thread state: bytes received but not consumed yet.
  std::unique_ptr<std::byte[]> read_buffer_;
  std::size_t read_begin_ = 0;
  std::size_t read_end_ = 0;
  std::mutex descriptors_mutex_;
  std::deque<int> descriptors_;  // received, not taken; closed by the destructor
  std::thread reader_;
};

}  // namespace replayd::client
