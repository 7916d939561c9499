#include "shared_table.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace replayd::shm_proto {
namespace {

constexpr std::size_t kPageBytes = 4096;
constexpr std::uint32_t kAbsent = ~0U;
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "stamps are shared between processes: they must not hide a lock");

std::size_t round_up(std::size_t bytes) { return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes; }

[[noreturn]] void fail(const std::string& call) {
  throw std::runtime_error(call + ": " + std::strerror(errno));
}

int make_memfd(const char* name, std::size_t bytes) {
  const int fd = ::memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) fail("memfd_create");
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) fail("ftruncate");
  return fd;
}

void* map(int fd, std::size_t bytes, int protection) {
  void* at = ::mmap(nullptr, bytes, protection, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (at == MAP_FAILED) fail("mmap");
  return at;
}

}  // namespace

TableLayout::TableLayout(const Shape& shape) {
  for (auto bytes : shape.field_bytes) {
    column_offset.push_back(data_bytes);
    data_bytes += round_up(bytes * shape.capacity_items);
  }
  stamp_bytes = round_up(sizeof(std::uint64_t) * shape.capacity_items);
}

TableView map_table(const Shape& shape, int data_fd, int stamp_fd, bool writable_data) {
  TableView view{&shape, TableLayout(shape)};
  const int data_protection = writable_data ? PROT_READ | PROT_WRITE : PROT_READ;
  view.data = static_cast<std::byte*>(map(data_fd, view.layout.data_bytes, data_protection));
  view.stamps = static_cast<const std::atomic<std::uint64_t>*>(
      map(stamp_fd, view.layout.stamp_bytes, PROT_READ));
  return view;
}

void copy_column(const TableView& table, std::size_t field, std::span<const std::uint32_t> slots,
                 std::byte* out) {
  constexpr std::size_t kAhead = 8;
  const std::size_t bytes = table.shape->field_bytes[field];
  for (std::size_t i = 0; i < slots.size() && i < kAhead; ++i) __builtin_prefetch(table.row(field, slots[i]));
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (i + kAhead < slots.size()) __builtin_prefetch(table.row(field, slots[i + kAhead]));
    std::memcpy(out + i * bytes, table.row(field, slots[i]), bytes);
  }
}

OwnerTable::OwnerTable(const Shape& shape)
    : shape_(shape),
      view_{&shape, TableLayout(shape)},
      generation_(shape.capacity_items, 0),
      reserved_by_(shape.capacity_items, kNoWriter),
      position_(shape.capacity_items, kAbsent) {
  data_fd_ = make_memfd("replayd-table-data", view_.layout.data_bytes);
  stamp_fd_ = make_memfd("replayd-table-stamps", view_.layout.stamp_bytes);
  view_.data = static_cast<std::byte*>(
      map(data_fd_, view_.layout.data_bytes, PROT_READ | PROT_WRITE));
  auto* stamp_memory = map(stamp_fd_, view_.layout.stamp_bytes, PROT_READ | PROT_WRITE);
  stamps_ = new (stamp_memory) std::atomic<std::uint64_t>[shape.capacity_items];
  view_.stamps = stamps_;
  sampleable_.reserve(shape.capacity_items);
  for (std::size_t i = 0; i < shape.capacity_items; ++i)
    overwrite_with_fill();
}

OwnerTable::~OwnerTable() {
  ::munmap(view_.data, view_.layout.data_bytes);
  ::munmap(stamps_, view_.layout.stamp_bytes);
  ::close(data_fd_);
  ::close(stamp_fd_);
}

void OwnerTable::draw(std::size_t n, std::vector<std::uint32_t>& out) {
  out.resize(n);
  const std::uint64_t size = sampleable_.size();
  if (size == 0) throw std::runtime_error("draw: no sampleable item");
  for (auto& slot : out)
    slot = sampleable_[random_() % size];
}

std::uint32_t OwnerTable::next_victim() {
  if (!free_.empty()) {
    const std::uint32_t slot = free_.back();
    free_.pop_back();
    return slot;
  }
  // Oldest first, in ring order; reserved slots belong to a writer and are skipped.
  for (std::size_t tries = 0; tries < shape_.capacity_items; ++tries) {
    const auto slot = static_cast<std::uint32_t>(fifo_cursor_);
    fifo_cursor_ = (fifo_cursor_ + 1) % shape_.capacity_items;
    if (reserved_by_[slot] == kNoWriter) return slot;
  }
  throw std::runtime_error("every slot is reserved");
}

// Seqlock write side, step 1: no reader may accept this slot's old key after this.
void OwnerTable::mark_busy(std::uint32_t slot) {
  remove_sampleable(slot);
  stamps_[slot].store(kBusyStamp, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // the busy stamp before any new byte
}

// Seqlock write side, step 2: the rows are complete; a new key makes them sampleable.
std::uint64_t OwnerTable::publish(std::uint32_t slot) {
  const std::uint64_t key = (static_cast<std::uint64_t>(++generation_[slot]) << 32) | slot;
  stamps_[slot].store(key, std::memory_order_release);
  add_sampleable(slot);
  return key;
}

std::uint64_t OwnerTable::insert(const std::byte* item) {
  const std::uint32_t slot = next_victim();
  mark_busy(slot);
  for (std::size_t f = 0; f < shape_.field_bytes.size(); ++f) {
    std::memcpy(view_.row(f, slot), item, shape_.field_bytes[f]);
    item += shape_.field_bytes[f];
  }
  return publish(slot);
}

std::uint64_t OwnerTable::overwrite_with_fill() {
  const std::uint32_t slot = next_victim();
  mark_busy(slot);
  const std::uint64_t next_key = (static_cast<std::uint64_t>(generation_[slot] + 1) << 32) | slot;
  for (std::size_t f = 0; f < shape_.field_bytes.size(); ++f)
    std::memset(view_.row(f, slot), fill_byte(next_key, f), shape_.field_bytes[f]);
  return publish(slot);
}

std::uint32_t OwnerTable::reserve(int writer) {
  const std::uint32_t slot = next_victim();
  mark_busy(slot);
  reserved_by_[slot] = writer;
  return slot;
}

bool OwnerTable::commit(int writer, std::uint32_t slot) {
  if (slot >= shape_.capacity_items || reserved_by_[slot] != writer) return false;
  reserved_by_[slot] = kNoWriter;
  publish(slot);
  return true;
}

std::size_t OwnerTable::release_reservations(int writer) {
  std::size_t released = 0;
  for (std::uint32_t slot = 0; slot < shape_.capacity_items; ++slot) {
    if (reserved_by_[slot] != writer) continue;
    reserved_by_[slot] = kNoWriter;
    free_.push_back(slot);  // stamp stays busy: nothing half-written is ever drawn
    ++released;
  }
  return released;
}

std::size_t OwnerTable::reserved() const {
  std::size_t count = 0;
  for (int writer : reserved_by_)
    count += writer != kNoWriter;
  return count;
}

void OwnerTable::add_sampleable(std::uint32_t slot) {
  position_[slot] = static_cast<std::uint32_t>(sampleable_.size());
  sampleable_.push_back(slot);
}

void OwnerTable::remove_sampleable(std::uint32_t slot) {
  const std::uint32_t at = position_[slot];
  if (at == kAbsent) return;
  const std::uint32_t last = sampleable_.back();
  sampleable_[at] = last;
  position_[last] = at;
  sampleable_.pop_back();
  position_[slot] = kAbsent;
}

}  // namespace replayd::shm_proto
