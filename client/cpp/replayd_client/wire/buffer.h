// Buffer: an owned byte array holding one reply payload, aligned for any column type (the
// allocator's 16-byte alignment; columns start at multiples of 8), left uninitialised until
// the socket fills it. Move-only; moving keeps the bytes at the same address, so views into
// a Buffer stay valid across moves. Not thread-safe to mutate; read-only use is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>

namespace replayd::client {

class Buffer {
 public:
  Buffer() = default;
  // Allocates `bytes` uninitialised bytes (nothing for 0). Throws std::bad_alloc.
  explicit Buffer(std::size_t bytes)
      : data_(bytes ? new std::byte[bytes] : nullptr), size_(bytes) {}

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<const std::byte> span() const { return {data_.get(), size_}; }

  // The T at byte `offset`; the caller checked bounds and alignment.
  template <typename T>
  const T* as(std::size_t offset) const {
    return reinterpret_cast<const T*>(data_.get() + offset);
  }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t size_ = 0;
};

// One reply frame as received: its request id, JSON metadata text and payload.
struct Reply {
  std::uint64_t request_id = 0;
  std::string meta;
  Buffer payload;
};

}  // namespace replayd::client
