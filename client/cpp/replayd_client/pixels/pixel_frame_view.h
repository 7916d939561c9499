// Views of decoded frame-field values (docs/PROTOCOL.md, "Frame fields") that copy nothing:
// a FrameView is a pointer, up to three leading dimensions and their byte strides over
// whole values of one field, like numpy's as_strided. Several positions of a view may show
// the same value (stacks overlap). A view borrows the frames of the batch it came from and
// is valid as long as that batch (or whatever it was moved into) lives. Read-only; safe to
// read from several threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "replayd_client/dtype.h"
#include "replayd_client/error.h"

namespace replayd::client {

// One frame field of a reply, as its "frames" metadata entry describes it.
struct FrameFieldSpec {
  std::string name;
  DType dtype = DType::uint8;
  std::vector<std::uint64_t> shape;  // of one value
  std::size_t item_bytes = 0;        // prod(shape) * dtype_bytes(dtype)
  std::uint64_t stack = 1;
  bool next_of = false;
  bool zstd = false;  // sent compressed (decoded by the client)
};

class FrameView {
 public:
  static constexpr std::size_t kMaxRank = 3;

  FrameView() = default;
  // `dims` and `strides` (bytes) of the leading dimensions, at most kMaxRank of each.
  FrameView(const std::byte* data, std::initializer_list<std::uint64_t> dims,
            std::initializer_list<std::uint64_t> strides, const FrameFieldSpec& spec);

  std::size_t rank() const { return rank_; }
  std::uint64_t dim(std::size_t axis) const { return dims_.at(axis); }
  std::uint64_t stride_bytes(std::size_t axis) const { return strides_.at(axis); }
  // The first value's bytes; a value at index (i, j, ...) starts at data() + sum(index * stride).
  const std::byte* data() const { return data_; }
  DType dtype() const { return spec_->dtype; }
  // The shape of one value (the field's shape).
  const std::vector<std::uint64_t>& item_shape() const { return spec_->shape; }
  std::size_t item_bytes() const { return spec_->item_bytes; }

  // The view with its first dimension fixed at i (rank - 1). Throws std::out_of_range
  // for i >= dim(0) or a view of rank 0.
  FrameView operator[](std::uint64_t i) const;
  // The value at `index` (one entry per dimension), item_bytes() bytes. Throws
  // std::out_of_range for an index of the wrong length or out of bounds. O(rank).
  std::span<const std::byte> item(std::initializer_list<std::uint64_t> index) const;
  // The same typed; throws Error(invalid_argument) when T is not the field's dtype.
  template <typename T>
  std::span<const T> value(std::initializer_list<std::uint64_t> index) const {
    check_type(dtype_of<T>);
    const auto bytes = item(index);
    return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
  }
  // A rank-1 view whose values lie back to back (a stack): all of them as one span of
  // dim(0) values. Throws Error(invalid_argument) for any other view.
  std::span<const std::byte> contiguous() const;
  template <typename T>
  std::span<const T> contiguous_as() const {
    check_type(dtype_of<T>);
    const auto bytes = contiguous();
    return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
  }

 private:
  void check_type(DType wanted) const;

  const std::byte* data_ = nullptr;
  std::size_t rank_ = 0;
  std::array<std::uint64_t, kMaxRank> dims_{};
  std::array<std::uint64_t, kMaxRank> strides_{};
  const FrameFieldSpec* spec_ = nullptr;
};

}  // namespace replayd::client
