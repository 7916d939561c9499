// BlobColumn: the values of one compressed field, one variable-size byte string per slot
// (a zstd frame as the writer made it). Each value has its own heap block, so removing
// items in any order (FIFO, uniform, prioritized, deletes) frees exactly their bytes and
// never needs compaction; the allocator reuses freed blocks for new values of similar size.
// Memory: kIndexBytesPerSlot per slot always, plus per stored value its size and
// kOverheadPerValue (the allocator's header and rounding, counted so that max_table_bytes
// stays an upper bound). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace replayd {

class BlobColumn {
 public:
  static constexpr std::uint64_t kIndexBytesPerSlot = sizeof(void*) + sizeof(std::uint32_t) + 4;
  static constexpr std::uint64_t kOverheadPerValue = 16;

  explicit BlobColumn(std::uint32_t capacity) : values_(capacity), sizes_(capacity, 0) {}

  // The value of `slot` (empty when none is stored). Valid until the slot's next set/clear.
  std::span<const std::byte> get(std::uint32_t slot) const {
    return {values_[slot].get(), sizes_[slot]};
  }
  // Replaces the value of `slot` with a copy of `bytes` (empty stores nothing).
  void set(std::uint32_t slot, std::span<const std::byte> bytes);
  void clear(std::uint32_t slot);
  void clear_all();

  // What a value of `size` bytes costs (its bytes and kOverheadPerValue; 0 for none).
  static std::uint64_t cost(std::uint64_t size) { return size == 0 ? 0 : size + kOverheadPerValue; }
  // Sum of cost() over the stored values.
  std::uint64_t stored_bytes() const { return stored_bytes_; }
  // stored_bytes() plus the per-slot index.
  std::uint64_t allocated_bytes() const {
    return stored_bytes_ + kIndexBytesPerSlot * sizes_.size();
  }
  void prefetch(std::uint32_t slot) const { __builtin_prefetch(values_[slot].get()); }

 private:
  std::vector<std::unique_ptr<std::byte[]>> values_;
  std::vector<std::uint32_t> sizes_;
  std::uint64_t stored_bytes_ = 0;
};

}  // namespace replayd
