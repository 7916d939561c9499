#include "replayd_client/shm/table_mapping.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "replayd_client/error.h"

namespace replayd::client {
namespace {

std::uint64_t uint_at(const boost::json::object& meta, std::string_view key) {
  const boost::json::value* value = meta.if_contains(key);
  if (value == nullptr || !value->is_number()) {
    throw Error(ErrorCode::bad_reply, "map reply without a number '" + std::string(key) + "'");
  }
  if (value->is_uint64()) return value->get_uint64();
  if (value->is_int64() && value->get_int64() >= 0)
    return static_cast<std::uint64_t>(value->get_int64());
  throw Error(ErrorCode::bad_reply, "map reply: '" + std::string(key) + "' is not a count");
}

// Maps `bytes` of `fd` (closing it), read-only or read-write.
void* map_shared(int fd, std::size_t bytes, bool writable) {
  void* base =
      ::mmap(nullptr, bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  const int error = errno;
  ::close(fd);
  if (base == MAP_FAILED) {
    throw Error(ErrorCode::connection_lost,
                "mapping " + std::to_string(bytes) +
                    " bytes of shared memory failed: " + std::strerror(error));
  }
  return base;
}

}  // namespace

TableMapping::TableMapping(const boost::json::object& meta, int fd) {
  if (fd < 0) throw Error(ErrorCode::bad_reply, "a map_table reply without its descriptor");
  std::uint64_t bytes = 0;
  try {
    region_ = uint_at(meta, "region");
    capacity_ = uint_at(meta, "capacity");
    const std::uint64_t slot_bits = uint_at(meta, "slot_bits");
    bytes = uint_at(meta, "bytes");
    const std::uint64_t stamps_offset = uint_at(meta, "stamps_offset");
    if (slot_bits == 0 || slot_bits > 62 || capacity_ == 0 || capacity_ > (1ull << slot_bits) ||
        stamps_offset % 8 != 0 || stamps_offset > bytes || capacity_ * 8 > bytes - stamps_offset) {
      throw Error(ErrorCode::bad_reply, "map_table: a layout that does not fit its block");
    }
    slot_mask_ = (std::uint64_t{1} << slot_bits) - 1;
    const boost::json::value* columns = meta.if_contains("columns");
    if (columns == nullptr || !columns->is_array()) {
      throw Error(ErrorCode::bad_reply, "map_table reply without its columns");
    }
    for (const auto& value : columns->get_array()) {
      const auto& column = value.as_object();
      Column described;
      described.name = std::string(column.at("name").as_string());
      const auto dtype = parse_dtype(std::string_view(column.at("dtype").as_string()));
      if (!dtype) throw Error(ErrorCode::bad_reply, "map_table: a column of an unknown dtype");
      described.dtype = *dtype;
      for (const auto& dim : column.at("shape").as_array())
        described.shape.push_back(dim.to_number<std::uint64_t>());
      described.item_bytes = uint_at(column, "item_bytes");
      const std::uint64_t offset = uint_at(column, "offset");
      if (offset > bytes || described.item_bytes > (bytes - offset) / capacity_) {
        throw Error(ErrorCode::bad_reply,
                    "map_table: column '" + described.name + "' does not fit its block");
      }
      described.data = reinterpret_cast<const std::byte*>(offset);  // relocated below
      columns_.push_back(std::move(described));
    }
    base_ = map_shared(fd, bytes, false);
    fd = -1;
    bytes_ = bytes;
    stamps_ =
        reinterpret_cast<const std::uint64_t*>(static_cast<std::byte*>(base_) + stamps_offset);
    for (auto& column : columns_)
      column.data =
          static_cast<const std::byte*>(base_) + reinterpret_cast<std::uintptr_t>(column.data);
  } catch (const std::exception& e) {
    if (fd >= 0) ::close(fd);
    if (const auto* error = dynamic_cast<const Error*>(&e)) throw *error;
    throw Error(ErrorCode::bad_reply, std::string("map_table reply: ") + e.what());
  }
}

TableMapping::~TableMapping() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

std::vector<std::size_t> TableMapping::gather(std::span<const std::uint64_t> keys,
                                              std::span<std::byte* const> out) const {
  if (out.size() != columns_.size()) {
    throw Error(ErrorCode::invalid_argument, "gather: one destination per column");
  }
  const std::size_t n = keys.size();
  for (std::size_t i = 0; i < n; ++i) {
    if ((keys[i] & slot_mask_) >= capacity_) {
      throw Error(ErrorCode::bad_reply, "a sampled key names a slot beyond the table's capacity");
    }
  }
  constexpr std::size_t kAhead = 8;  // rows between a prefetch and its copy
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      const std::uint64_t ahead = keys[i + kAhead] & slot_mask_;
      for (const auto& column : columns_)
        __builtin_prefetch(column.data + ahead * column.item_bytes);
    }
    const std::uint64_t slot = keys[i] & slot_mask_;
    for (std::size_t f = 0; f < columns_.size(); ++f) {
      const Column& column = columns_[f];
      std::memcpy(out[f] + i * column.item_bytes, column.data + slot * column.item_bytes,
                  column.item_bytes);
    }
  }
  // The rows' loads above happen before the stamps' loads below (seqlock reader).
  std::atomic_thread_fence(std::memory_order_acquire);
  std::vector<std::size_t> changed;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t slot = keys[i] & slot_mask_;
    const std::uint64_t stamp =
        std::atomic_ref<const std::uint64_t>(stamps_[slot]).load(std::memory_order_relaxed);
    if (stamp != keys[i]) changed.push_back(i);
  }
  return changed;
}

StagingArena::StagingArena(const boost::json::object& meta, int fd) {
  if (fd < 0) throw Error(ErrorCode::bad_reply, "a map_staging reply without its descriptor");
  try {
    id_ = uint_at(meta, "arena");
    bytes_ = uint_at(meta, "bytes");
  } catch (...) {
    ::close(fd);
    throw;
  }
  base_ = map_shared(fd, bytes_, true);
}

StagingArena::~StagingArena() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

}  // namespace replayd::client
