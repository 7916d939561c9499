#include "replayd_client/pixels/pixel_frame_view.h"

#include <stdexcept>

namespace replayd::client {

FrameView::FrameView(const std::byte* data, std::initializer_list<std::uint64_t> dims,
                     std::initializer_list<std::uint64_t> strides, const FrameFieldSpec& spec)
    : data_(data), rank_(dims.size()), spec_(&spec) {
  if (dims.size() != strides.size() || dims.size() > kMaxRank) {
    throw std::out_of_range("FrameView: dims and strides of one rank <= 3");
  }
  std::copy(dims.begin(), dims.end(), dims_.begin());
  std::copy(strides.begin(), strides.end(), strides_.begin());
}

FrameView FrameView::operator[](std::uint64_t i) const {
  if (rank_ == 0 || i >= dims_[0]) throw std::out_of_range("FrameView index out of range");
  FrameView sub = *this;
  sub.data_ = data_ + i * strides_[0];
  sub.rank_ = rank_ - 1;
  for (std::size_t axis = 0; axis + 1 < rank_; ++axis) {
    sub.dims_[axis] = dims_[axis + 1];
    sub.strides_[axis] = strides_[axis + 1];
  }
  return sub;
}

std::span<const std::byte> FrameView::item(std::initializer_list<std::uint64_t> index) const {
  if (index.size() != rank_) throw std::out_of_range("FrameView: one index per dimension");
  const std::byte* at = data_;
  std::size_t axis = 0;
  for (const std::uint64_t i : index) {
    if (i >= dims_[axis]) throw std::out_of_range("FrameView index out of range");
    at += i * strides_[axis++];
  }
  return {at, spec_->item_bytes};
}

std::span<const std::byte> FrameView::contiguous() const {
  if (rank_ != 1 || (dims_[0] > 1 && strides_[0] != spec_->item_bytes)) {
    throw Error(ErrorCode::invalid_argument,
                "frames of field '" + spec_->name + "': not one run of values back to back");
  }
  return {data_, dims_[0] * spec_->item_bytes};
}

void FrameView::check_type(DType wanted) const {
  if (wanted != spec_->dtype) {
    throw Error(ErrorCode::invalid_argument, "field '" + spec_->name + "' holds " +
                                                 std::string(dtype_name(spec_->dtype)) + ", not " +
                                                 std::string(dtype_name(wanted)));
  }
}

}  // namespace replayd::client
