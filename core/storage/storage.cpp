#include "core/storage/storage.h"

#include <algorithm>
#include <bit>

namespace replayd {

Storage::Storage(const Schema& schema, std::uint32_t capacity)
    : capacity_(capacity),
      slot_bits_(std::max<std::uint64_t>(1, std::bit_width(capacity - 1))),
      keys_(capacity, 0),
      generations_(capacity, 0),
      priorities_(capacity, 0.0),
      times_sampled_(capacity, 0),
      occupied_(capacity, 0) {
  for (const auto& field : schema.fields()) {
    item_bytes_.push_back(field.item_bytes());
    if (field.compression != Compression::none) {
      columns_.emplace_back();
      blobs_.push_back(std::make_unique<BlobColumn>(capacity));
    } else {
      columns_.push_back(
          std::make_unique_for_overwrite<std::byte[]>(field.item_bytes() * capacity));
      blobs_.emplace_back();
    }
  }
  clear();
}

std::uint64_t Storage::allocated_bytes() const {
  std::uint64_t bytes = 0;
  for (std::size_t f = 0; f < item_bytes_.size(); ++f)
    bytes += blobs_[f] ? blobs_[f]->allocated_bytes() : item_bytes_[f] * capacity_;
  bytes += keys_.capacity() * sizeof(keys_[0]) + generations_.capacity() * sizeof(generations_[0]) +
           priorities_.capacity() * sizeof(priorities_[0]) +
           times_sampled_.capacity() * sizeof(times_sampled_[0]) +
           occupied_.capacity() * sizeof(occupied_[0]) + free_.capacity() * sizeof(free_[0]);
  return bytes;
}

std::uint32_t Storage::acquire() {
  const std::uint32_t slot = free_.back();  // occupy_with_key pops it in O(1)
  occupy_with_key(slot, (++generations_[slot] << slot_bits_) | slot);
  return slot;
}

void Storage::occupy_with_key(std::uint32_t slot, std::uint64_t key) {
  if (!free_.empty() && free_.back() == slot) {
    free_.pop_back();
  } else if (auto it = std::find(free_.begin(), free_.end(), slot); it != free_.end()) {
    free_.erase(it);  // restore path only
  }
  keys_[slot] = key;
  occupied_[slot] = 1;
  priorities_[slot] = 0.0;
  times_sampled_[slot] = 0;
}

void Storage::restore_layout(std::span<const std::uint32_t> free_stack) {
  std::fill(occupied_.begin(), occupied_.end(), 1);
  free_.assign(free_stack.begin(), free_stack.end());
  for (auto slot : free_)
    occupied_[slot] = 0;
  for (std::uint32_t slot = 0; slot < capacity_; ++slot) {
    if (!occupied_[slot]) continue;
    keys_[slot] = (generations_[slot] << slot_bits_) | slot;
    priorities_[slot] = 0.0;
    times_sampled_[slot] = 0;
  }
}

std::uint64_t Storage::blob_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& blobs : blobs_)
    if (blobs) bytes += blobs->stored_bytes();
  return bytes;
}

void Storage::release(std::uint32_t slot) {
  for (const auto& blobs : blobs_)
    if (blobs) blobs->clear(slot);
  occupied_[slot] = 0;
  free_.push_back(slot);
}

void Storage::clear() {
  for (const auto& blobs : blobs_)
    if (blobs) blobs->clear_all();
  std::fill(occupied_.begin(), occupied_.end(), 0);
  free_.resize(capacity_);
  for (std::uint32_t i = 0; i < capacity_; ++i)
    free_[i] = capacity_ - 1 - i;
}

std::optional<std::uint32_t> Storage::find(std::uint64_t key) const {
  const std::uint64_t slot = key & ((std::uint64_t{1} << slot_bits_) - 1);
  if (slot >= capacity_ || !occupied_[slot] || keys_[slot] != key) return std::nullopt;
  return static_cast<std::uint32_t>(slot);
}

}  // namespace replayd
