// A columnar replay table whose bytes live in memfd mappings that clients map too.
//
// Ownership (the contract the mechanism rests on):
// - The data mapping holds one array per field (capacity_items x field_bytes, each column
//   page-aligned). The owner writes rows it inserts; an explorer writes only the slots the
//   owner reserved for it, and only until it commits them; learners map it read-only.
// - The stamp mapping holds one u64 per slot: the key of the item in the slot, or
//   kBusyStamp while the slot is reserved or being overwritten. Only the owner writes it;
//   every client maps it read-only.
// - Seqlock rule: the owner sets a slot's stamp to kBusyStamp (then a release fence) before
//   the slot's bytes change, and stores the new key (release) after they are complete. A
//   reader copies the row, issues an acquire fence, and accepts the copy only if the stamp
//   still holds the key it was given. Keys are never reused, so a changed row is always seen.
// - Everything a client reads from a mapping is untrusted: slots come from keys the owner
//   sent and are masked and bounds-checked before use.
// The owner side (OwnerTable) is single-threaded: one process, one thread, no locks.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "messages.h"
#include "shapes.h"

namespace replayd::shm_proto {

// Byte offsets of the columns in the data mapping; the same in every process.
struct TableLayout {
  explicit TableLayout(const Shape& shape);
  std::vector<std::size_t> column_offset;  // per field, page-aligned
  std::size_t data_bytes = 0;
  std::size_t stamp_bytes = 0;
};

// A mapping of the table in this process (the owner's or a client's).
struct TableView {
  const Shape* shape = nullptr;
  TableLayout layout;
  std::byte* data = nullptr;                           // writable only if mapped so
  const std::atomic<std::uint64_t>* stamps = nullptr;  // owner writes through OwnerTable

  std::byte* row(std::size_t field, std::size_t slot) const {
    return data + layout.column_offset[field] + slot * shape->field_bytes[field];
  }
};

// Copies rows `slots` of field `field` into `out` (slots.size() rows, one after another),
// prefetching 8 rows ahead as the server's sample path does. Every slot must be below the
// capacity (the caller checks untrusted ones). O(slots.size() * field_bytes).
void copy_column(const TableView& table, std::size_t field, std::span<const std::uint32_t> slots,
                 std::byte* out);

// Maps the table's two memfds; `writable_data` for an explorer, read-only otherwise.
// MAP_POPULATE takes the page faults now, not in the first timed gathers.
TableView map_table(const Shape& shape, int data_fd, int stamp_fd, bool writable_data);

// The byte every row of `field` holds for the item `key` (rows are filled with it, so a
// torn row -- some bytes of one item, some of another -- is recognisable).
inline std::uint8_t fill_byte(std::uint64_t key, std::size_t field) {
  return static_cast<std::uint8_t>(((key ^ (key >> 29)) * 0x9E3779B97F4A7C15ULL + field) >> 56);
}

// The owner's table: creates the memfds, fills every slot, and keeps the uniform selector
// (a dense array of sampleable slots with positions, O(1) insert, remove and draw), FIFO
// eviction in ring order, and the explorers' reservations.
class OwnerTable {
 public:
  explicit OwnerTable(const Shape& shape);  // every slot filled and sampleable
  ~OwnerTable();
  OwnerTable(const OwnerTable&) = delete;
  OwnerTable& operator=(const OwnerTable&) = delete;

  int data_fd() const { return data_fd_; }
  int stamp_fd() const { return stamp_fd_; }
  const TableView& view() const { return view_; }
  std::uint64_t key_of(std::size_t slot) const { return stamps_[slot].load(std::memory_order_relaxed); }

  // Draws `n` sampleable slots uniformly, with replacement, into `out`. O(n).
  void draw(std::size_t n, std::vector<std::uint32_t>& out);

  // Inserts one item (fields one after another in `item`) over the oldest slot. Returns
  // its key. Copies item_bytes.
  std::uint64_t insert(const std::byte* item);
  // Overwrites the oldest slot with a new item whose rows are all fill_byte(key, field),
  // as a concurrent explorer would. Returns the key.
  std::uint64_t overwrite_with_fill();

  // Reserves the oldest non-reserved slot for `writer`: its item is evicted (stamp busy,
  // no longer drawn). Returns the slot.
  std::uint32_t reserve(int writer);
  // Makes a slot `writer` reserved and filled sampleable under a new key. Returns false
  // (and changes nothing) if the slot is out of range or not reserved by `writer`.
  bool commit(int writer, std::uint32_t slot);
  // A writer disconnected (or died): its reserved slots become free, never sampleable
  // with half-written rows. Returns how many were released.
  std::size_t release_reservations(int writer);

  std::size_t sampleable() const { return sampleable_.size(); }
  std::size_t reserved() const;
  std::size_t free_slots() const { return free_.size(); }

 private:
  static constexpr int kNoWriter = -1;
  std::uint32_t next_victim();
  void mark_busy(std::uint32_t slot);
  std::uint64_t publish(std::uint32_t slot);
  void add_sampleable(std::uint32_t slot);
  void remove_sampleable(std::uint32_t slot);

  const Shape& shape_;
  int data_fd_ = -1;
  int stamp_fd_ = -1;
  TableView view_;
  std::atomic<std::uint64_t>* stamps_ = nullptr;
  std::vector<std::uint32_t> generation_;
  std::vector<int> reserved_by_;           // per slot: a writer, or kNoWriter
  std::vector<std::uint32_t> sampleable_;  // dense
  std::vector<std::uint32_t> position_;    // per slot: index in sampleable_, or kAbsent
  std::vector<std::uint32_t> free_;        // slots with no item and no reservation
  std::size_t fifo_cursor_ = 0;
  std::mt19937_64 random_{7};
};

}  // namespace replayd::shm_proto
