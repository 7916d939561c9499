// ByteBuffer: an owned, fixed-size, uninitialised byte array (new[] gives at least 16-byte
// alignment, so columns at 8-aligned offsets can be viewed in place). Move-only; cheaper
// than std::vector<std::byte>, which zero-fills on resize.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace replayd::service {

class ByteBuffer {
 public:
  ByteBuffer() = default;
  explicit ByteBuffer(std::size_t size)
      : data_(size ? std::make_unique_for_overwrite<std::byte[]>(size) : nullptr), size_(size) {}
  // Takes over `data` (at least `size` bytes, allocated with new[]).
  ByteBuffer(std::unique_ptr<std::byte[]> data, std::size_t size)
      : data_(std::move(data)), size_(size) {}

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<std::byte> span() { return {data_.get(), size_}; }
  std::span<const std::byte> span() const { return {data_.get(), size_}; }

  template <typename T>
  T* as(std::size_t offset) {
    return reinterpret_cast<T*>(data_.get() + offset);
  }
  template <typename T>
  const T* as(std::size_t offset) const {
    return reinterpret_cast<const T*>(data_.get() + offset);
  }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t size_ = 0;
};

}  // namespace replayd::service
