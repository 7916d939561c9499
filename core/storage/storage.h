// Storage: the columnar item store of one table. One contiguous array per field holds that
// field for every slot (capacity * item_bytes, allocated once, never per item); beside it,
// per-slot metadata: key, priority, times sampled. A compressed field has no fixed array:
// its values are variable-size byte strings in a BlobColumn. Not thread-safe.
//
// Keys: each acquire() gives the slot a key never used before in this Storage:
//   key = (generation << slot_bits) | slot, generation = times this slot was acquired.
// A key therefore finds its slot in O(1) without a map, and a key whose item was evicted
// or deleted no longer matches (its slot is free or carries a newer generation): it is
// recognised as stale. Generations survive clear(), so keys stay unique across resets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/storage/blob_column.h"
#include "core/schema.h"

namespace replayd {

class Storage {
 public:
  // Allocates capacity * item_bytes of every uncompressed field (untouched pages cost no memory
  // until written). Precondition: 1 <= capacity <= kMaxCapacity.
  Storage(const Schema& schema, std::uint32_t capacity);

  static constexpr std::uint32_t kMaxCapacity = 1u << 31;
  // Bytes of per-slot metadata (key, generation, priority, times sampled, occupied flag,
  // free-stack entry): what a slot costs beside its data.
  static constexpr std::uint64_t kMetadataBytesPerSlot =
      sizeof(std::uint64_t) + sizeof(std::uint64_t) + sizeof(double) + sizeof(std::uint32_t) +
      sizeof(std::uint8_t) + sizeof(std::uint32_t);
  // What this Storage holds: its data columns, its blob columns (stored values and index)
  // and every metadata vector's capacity.
  std::uint64_t allocated_bytes() const;
  // What the stored values of compressed fields cost (BlobColumn::stored_bytes, summed).
  std::uint64_t blob_bytes() const;

  std::uint32_t capacity() const { return capacity_; }
  std::uint32_t size() const { return capacity_ - static_cast<std::uint32_t>(free_.size()); }
  bool full() const { return free_.empty(); }

  // Takes a free slot and gives it a fresh key. Precondition: !full(). O(1).
  std::uint32_t acquire();
  // Frees an occupied slot; its key becomes stale. O(1).
  void release(std::uint32_t slot);
  // Frees every slot. O(capacity).
  void clear();

  // The slot holding `key`, or nullopt when the key is stale or was never issued. O(1).
  std::optional<std::uint32_t> find(std::uint64_t key) const;
  bool occupied(std::uint32_t slot) const { return occupied_[slot] != 0; }

  std::uint64_t key(std::uint32_t slot) const { return keys_[slot]; }
  double priority(std::uint32_t slot) const { return priorities_[slot]; }
  void set_priority(std::uint32_t slot, double priority) { priorities_[slot] = priority; }
  std::uint32_t times_sampled(std::uint32_t slot) const { return times_sampled_[slot]; }
  void set_times_sampled(std::uint32_t slot, std::uint32_t n) { times_sampled_[slot] = n; }

  // Address of field `field`'s value for `slot`; valid while this Storage lives.
  // Precondition: the field is not compressed (those live in blobs(field)).
  std::byte* cell(std::size_t field, std::uint32_t slot) {
    return columns_[field].get() + slot * item_bytes_[field];
  }
  const std::byte* cell(std::size_t field, std::uint32_t slot) const {
    return columns_[field].get() + slot * item_bytes_[field];
  }
  // Bytes of one uncompressed value of the field (also of a compressed field's values once
  // decompressed).
  std::uint64_t item_bytes(std::size_t field) const { return item_bytes_[field]; }
  // The values of a compressed field; nullptr for other fields.
  BlobColumn* blobs(std::size_t field) { return blobs_[field].get(); }
  const BlobColumn* blobs(std::size_t field) const { return blobs_[field].get(); }

  // Snapshot support: the generation counter of each slot, and forcing a slot to hold a
  // given key (used only when restoring; the key's slot bits must name `slot`).
  std::uint64_t slot_bits() const { return slot_bits_; }
  std::uint64_t generation(std::uint32_t slot) const { return generations_[slot]; }
  void set_generation(std::uint32_t slot, std::uint64_t generation) {
    generations_[slot] = generation;
  }
  // The free slots as a stack: acquire() takes back() first.
  std::span<const std::uint32_t> free_slots() const { return free_; }
  // Restore path: exactly the slots of `free_stack` become free, in that stack order, and
  // every other slot becomes occupied with key (generation << slot_bits) | slot, priority 0
  // and times sampled 0 (the key acquire() gave it). Precondition (the caller validates):
  // distinct slots < capacity. O(capacity).
  void restore_layout(std::span<const std::uint32_t> free_stack);
  // Occupies the free `slot` with exactly `key`. Precondition: slot free, key's slot bits
  // equal slot.
  void occupy_with_key(std::uint32_t slot, std::uint64_t key);

 private:
  std::uint32_t capacity_;
  std::uint64_t slot_bits_;
  std::vector<std::uint64_t> item_bytes_;
  std::vector<std::unique_ptr<std::byte[]>> columns_;  // null for compressed fields
  std::vector<std::unique_ptr<BlobColumn>> blobs_;     // null for other fields
  std::vector<std::uint64_t> keys_;
  std::vector<std::uint64_t> generations_;
  std::vector<double> priorities_;
  std::vector<std::uint32_t> times_sampled_;
  std::vector<std::uint8_t> occupied_;
  std::vector<std::uint32_t> free_;  // stack of free slots; lowest slot on top
};

}  // namespace replayd
