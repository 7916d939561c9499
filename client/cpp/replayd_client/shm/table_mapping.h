// TableMapping: a table's column block mapped read-only (the shared-memory data plane,
// docs/SHM.md): its stamps and one array per field, as `map_table` described them, and the
// gather that copies sampled rows out of it and then checks each row's stamp.
// Ownership: owns the mapping (unmapped when destroyed); the table's data may change under
// it at any time (the server writes), which is what gather() checks for.
// Threading: const methods may be called from any number of threads at once.
#pragma once

#include <boost/json/object.hpp>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "replayd_client/dtype.h"

namespace replayd::client {

class TableMapping {
 public:
  struct Column {
    std::string name;
    DType dtype = DType::uint8;
    std::vector<std::uint64_t> shape;  // per item
    std::uint64_t item_bytes = 0;
    const std::byte* data = nullptr;  // capacity * item_bytes, in the mapping
  };

  // Maps the block of a map_table reply (`meta`) from `fd`, which it takes over (closes).
  // Throws Error(bad_reply) when the layout does not fit the block, Error(connection_lost)
  // when the mapping fails.
  TableMapping(const boost::json::object& meta, int fd);
  ~TableMapping();
  TableMapping(const TableMapping&) = delete;
  TableMapping& operator=(const TableMapping&) = delete;

  // Names this block among the server's: a sample's "region" must match it.
  std::uint64_t region() const { return region_; }
  std::uint64_t capacity() const { return capacity_; }
  const std::vector<Column>& columns() const { return columns_; }

  // Copies the rows of `keys` into `out` (one destination per column, in column order, each
  // keys.size() * item_bytes), prefetching ahead, then reads each slot's stamp after an
  // acquire fence. Returns the positions whose rows changed under the copy (their bytes in
  // `out` are not the items'; draw them again). Throws Error(bad_reply) for a key whose
  // slot is beyond the capacity. Cost: the bytes copied, plus a cache miss per row.
  std::vector<std::size_t> gather(std::span<const std::uint64_t> keys,
                                  std::span<std::byte* const> out) const;

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  std::uint64_t region_ = 0;
  std::uint64_t capacity_ = 0;
  std::uint64_t slot_mask_ = 0;
  const std::uint64_t* stamps_ = nullptr;
  std::vector<Column> columns_;
};

// StagingArena: one of the connection's staging arenas (`map_staging`), mapped read-write:
// an explorer writes rows here and names them in a staged insert (Client::insert_staged_async)
// instead of sending them. Rows named in a request must not change until its reply.
// Ownership: owns the mapping; the arena is released on the server by unmap_staging or when
// the connection closes. Threading: one writer.
class StagingArena {
 public:
  // From a map_staging reply and its descriptor (taken over). Throws like TableMapping.
  StagingArena(const boost::json::object& meta, int fd);
  ~StagingArena();
  StagingArena(const StagingArena&) = delete;
  StagingArena& operator=(const StagingArena&) = delete;

  std::uint64_t id() const { return id_; }
  std::span<std::byte> bytes() const { return {static_cast<std::byte*>(base_), bytes_}; }

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  std::uint64_t id_ = 0;
};

}  // namespace replayd::client
