#include "core/storage/storage.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <new>

namespace replayd {
namespace {

std::unique_ptr<ColumnMemory> private_memory_or_throw(const Schema& schema,
                                                      std::uint32_t capacity) {
  auto memory = allocate_private_column_memory("", StorageLayout::of(schema, capacity).total_bytes);
  if (!memory) throw std::bad_alloc();
  return std::move(memory).value();
}

}  // namespace

Storage::Storage(const Schema& schema, std::uint32_t capacity)
    : Storage(schema, capacity, private_memory_or_throw(schema, capacity)) {}

Storage::Storage(const Schema& schema, std::uint32_t capacity, std::unique_ptr<ColumnMemory> memory)
    : capacity_(capacity),
      slot_bits_(std::max<std::uint64_t>(1, std::bit_width(capacity - 1))),
      layout_(StorageLayout::of(schema, capacity)),
      memory_(std::move(memory)),
      stamps_(reinterpret_cast<std::uint64_t*>(memory_->bytes().data() + layout_.stamps_offset)),
      keys_(capacity, 0),
      generations_(capacity, 0),
      versions_(capacity, 0),
      priorities_(capacity, 0.0),
      times_sampled_(capacity, 0),
      occupied_(capacity, 0) {
  std::byte* base = memory_->bytes().data();
  for (std::size_t f = 0; f < schema.size(); ++f) {
    const Field& field = schema.field(f);
    item_bytes_.push_back(field.item_bytes());
    if (field.compression != Compression::none) {
      columns_.push_back(nullptr);
      blobs_.push_back(std::make_unique<BlobColumn>(capacity));
    } else {
      columns_.push_back(base + layout_.column_offsets[f]);
      blobs_.emplace_back();
    }
  }
  clear();
}

std::uint64_t Storage::allocated_bytes() const {
  std::uint64_t bytes = layout_.total_bytes;
  for (const auto& blobs : blobs_)
    if (blobs) bytes += blobs->allocated_bytes();
  bytes += keys_.capacity() * sizeof(keys_[0]) + generations_.capacity() * sizeof(generations_[0]) +
           versions_.capacity() * sizeof(versions_[0]) +
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

void Storage::publish(std::uint32_t slot) {
  std::atomic_ref<std::uint64_t>(stamps_[slot]).store(keys_[slot], std::memory_order_release);
}

bool Storage::stamp_holds_key(std::uint32_t slot) const {
  std::atomic_thread_fence(std::memory_order_acquire);
  return std::atomic_ref<std::uint64_t>(stamps_[slot]).load(std::memory_order_relaxed) ==
         keys_[slot];
}

void Storage::publish_all() {
  for (std::uint32_t slot = 0; slot < capacity_; ++slot) {
    std::atomic_ref<std::uint64_t>(stamps_[slot])
        .store(occupied_[slot] ? keys_[slot] : 0, std::memory_order_release);
  }
}

void Storage::occupy_with_key(std::uint32_t slot, std::uint64_t key) {
  // Busy before the caller changes the slot's bytes; the fence keeps those writes after it.
  std::atomic_ref<std::uint64_t>(stamps_[slot]).store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  if (!free_.empty() && free_.back() == slot) {
    free_.pop_back();
  } else if (auto it = std::find(free_.begin(), free_.end(), slot); it != free_.end()) {
    free_.erase(it);  // restore path only
  }
  keys_[slot] = key;
  occupied_[slot] = 1;
  versions_[slot] = 0;
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
    versions_[slot] = 0;
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

void Storage::unpublish(std::uint32_t slot) {
  std::atomic_ref<std::uint64_t>(stamps_[slot]).store(0, std::memory_order_release);
}

void Storage::discard_cells(std::uint32_t first, std::uint32_t last,
                            std::span<const std::uint64_t> written,
                            const std::function<bool(std::uint32_t)>& given_back) {
  constexpr std::uint64_t kPage = StorageLayout::kAlignment;
  // Whether every slot whose cells of `field` meet [from, to) lies in slots lo..hi and was
  // given back.
  const auto all_given_back = [&](std::uint64_t bytes, std::uint64_t from, std::uint64_t to) {
    const std::uint64_t lo = from / bytes;
    const std::uint64_t hi = std::min<std::uint64_t>((to + bytes - 1) / bytes, capacity_);
    for (std::uint64_t slot = lo; slot < hi; ++slot)
      if (!given_back(static_cast<std::uint32_t>(slot))) return false;
    return true;
  };
  for (std::size_t f = 0; f < columns_.size(); ++f) {
    if (columns_[f] == nullptr || written[f] == 0) continue;
    const std::uint64_t bytes = item_bytes_[f];
    const std::uint64_t column = layout_.column_offsets[f];
    const std::uint64_t column_bytes = std::uint64_t{capacity_} * bytes;
    const std::uint64_t begin = std::uint64_t{first} * bytes;  // within the column
    const std::uint64_t end = (std::uint64_t{last} + 1) * bytes;
    std::uint64_t from = (begin + kPage - 1) / kPage * kPage;
    if (from != begin && all_given_back(bytes, begin / kPage * kPage, begin)) from -= kPage;
    std::uint64_t to = end / kPage * kPage;
    const std::uint64_t page_end = std::min(to + kPage, column_bytes);
    if (to != end && end < column_bytes && all_given_back(bytes, end, page_end)) to += kPage;
    if (to != end && end >= column_bytes) to = (column_bytes + kPage - 1) / kPage * kPage;
    if (to > from) memory_->discard(column + from, to - from);
  }
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
