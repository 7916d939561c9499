// Storage: the columnar item store of one table. One contiguous array per field holds that
// field for every slot (capacity * item_bytes, allocated once, never per item); beside it,
// per-slot metadata: key, priority, times sampled. A compressed field has no fixed array:
// its values are variable-size byte strings in a BlobColumn. Not thread-safe.
//
// The arrays and a stamp per slot live in one block of ColumnMemory (storage_layout.h),
// which other processes may map read-only and read while the server writes (docs/SHM.md).
// Stamps make such reads safe, seqlock style: a slot's stamp holds the key of the item whose
// bytes are complete in the slot, or 0 while its bytes may change. acquire() sets it to 0
// before the caller writes the slot's cells, publish() stores the key after (with release
// order). A reader that copies a row and then (after an acquire fence) still finds the key
// it was given knows the copy is that item's. The stamp changes only when the bytes are
// about to: release() and clear() leave it, since a freed slot keeps its bytes.
//
// Keys: each acquire() gives the slot a key never used before in this Storage:
//   key = (generation << slot_bits) | slot, generation = times this slot was acquired.
// A key therefore finds its slot in O(1) without a map, and a key whose item was evicted
// or deleted no longer matches (its slot is free or carries a newer generation): it is
// recognised as stale. Generations survive clear(), so keys stay unique across resets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/schema.h"
#include "core/storage/blob_column.h"
#include "core/storage/column_memory.h"
#include "core/storage/storage_layout.h"

namespace replayd {

class Storage {
 public:
  // Keeps its stamps and uncompressed columns in `memory`, laid out as
  // StorageLayout::of(schema, capacity) (untouched pages cost no memory until written).
  // Preconditions: 1 <= capacity <= kMaxCapacity; memory holds at least the layout's
  // total_bytes, zero-filled.
  Storage(const Schema& schema, std::uint32_t capacity, std::unique_ptr<ColumnMemory> memory);
  // The same in private memory; throws std::bad_alloc when the system refuses it.
  Storage(const Schema& schema, std::uint32_t capacity);

  static constexpr std::uint32_t kMaxCapacity = 1u << 31;
  // Bytes of per-slot metadata (key, generation, policy version, priority, times sampled,
  // occupied flag, free-stack entry): what a slot costs beside its data and its stamp (in
  // the layout).
  static constexpr std::uint64_t kMetadataBytesPerSlot =
      sizeof(std::uint64_t) + sizeof(std::uint64_t) + sizeof(std::uint64_t) + sizeof(double) +
      sizeof(std::uint32_t) + sizeof(std::uint8_t) + sizeof(std::uint32_t);
  // What this Storage holds: its data columns, its blob columns (stored values and index)
  // and every metadata vector's capacity.
  std::uint64_t allocated_bytes() const;
  // What the stored values of compressed fields cost (BlobColumn::stored_bytes, summed).
  std::uint64_t blob_bytes() const;

  std::uint32_t capacity() const { return capacity_; }
  std::uint32_t size() const { return capacity_ - static_cast<std::uint32_t>(free_.size()); }
  bool full() const { return free_.empty(); }

  // Takes a free slot and gives it a fresh key; its stamp becomes 0 (busy) until publish().
  // Precondition: !full(). O(1).
  std::uint32_t acquire();
  // The slot's cells are written: its stamp takes its key (release order). O(1).
  void publish(std::uint32_t slot);
  // Whether the slot's stamp still holds key(slot), read after an acquire fence: the bytes
  // read from the slot before this call are the item's. For a reader in another process
  // that shares the memory (a forked snapshot writer, whose keys are its own copy). O(1).
  bool stamp_holds_key(std::uint32_t slot) const;
  // The slot's bytes are about to change without the slot being freed (a file tier gives
  // its pages back): its stamp becomes 0, so that no reader takes them for the item's. O(1).
  void unpublish(std::uint32_t slot);
  // Gives back to the system the pages of the fixed-size cells of slots first..last of the
  // fields with written[f] != 0 (a file tier wrote them out); reading them again reads
  // zeros. A page shared with neighbouring slots goes too when `given_back(slot)` holds for
  // every slot it covers. O(fields + slots sharing the edge pages), a system call per field.
  void discard_cells(std::uint32_t first, std::uint32_t last,
                     std::span<const std::uint64_t> written,
                     const std::function<bool(std::uint32_t)>& given_back);
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
  // The policy version the item was acted with (0: none given); set once, when stored.
  std::uint64_t version(std::uint32_t slot) const { return versions_[slot]; }
  void set_version(std::uint32_t slot, std::uint64_t version) { versions_[slot] = version; }
  void set_times_sampled(std::uint32_t slot, std::uint32_t n) { times_sampled_[slot] = n; }

  // Address of field `field`'s value for `slot`; valid while this Storage lives.
  // Precondition: the field is not compressed (those live in blobs(field)).
  std::byte* cell(std::size_t field, std::uint32_t slot) {
    return columns_[field] + slot * item_bytes_[field];
  }
  const std::byte* cell(std::size_t field, std::uint32_t slot) const {
    return columns_[field] + slot * item_bytes_[field];
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
  // every other slot becomes occupied with key (generation << slot_bits) | slot, priority 0,
  // version 0 and times sampled 0 (the key acquire() gave it). Precondition (the caller validates):
  // distinct slots < capacity. O(capacity).
  void restore_layout(std::span<const std::uint32_t> free_stack);
  // Occupies the free `slot` with exactly `key`. Precondition: slot free, key's slot bits
  // equal slot. Its stamp is 0 until publish() (or publish_all()).
  void occupy_with_key(std::uint32_t slot, std::uint64_t key);
  // Restore path, once every cell is written: each occupied slot's stamp takes its key.
  void publish_all();

  // Where the stamps and columns lie in memory(), and the block itself (for the server to
  // share it).
  const StorageLayout& layout() const { return layout_; }
  const ColumnMemory& memory() const { return *memory_; }

 private:
  std::uint32_t capacity_;
  std::uint64_t slot_bits_;
  StorageLayout layout_;
  std::unique_ptr<ColumnMemory> memory_;
  std::uint64_t* stamps_;  // in memory_; see the header comment
  std::vector<std::uint64_t> item_bytes_;
  std::vector<std::byte*> columns_;                 // in memory_; null for compressed fields
  std::vector<std::unique_ptr<BlobColumn>> blobs_;  // null for other fields
  std::vector<std::uint64_t> keys_;  // private: a forked snapshot writer keeps the fork's
  std::vector<std::uint64_t> generations_;
  std::vector<std::uint64_t> versions_;
  std::vector<double> priorities_;
  std::vector<std::uint32_t> times_sampled_;
  std::vector<std::uint8_t> occupied_;
  std::vector<std::uint32_t> free_;  // stack of free slots; lowest slot on top
};

}  // namespace replayd
