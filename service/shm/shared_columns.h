// Tables' column blocks in shared memory: the ColumnMemorySource the server gives every
// table when the data plane is on (config `shared_memory`), so that same-host clients can
// map a table's stamps and columns read-only (`map_table`, docs/SHM.md).
// Ownership: a SharedColumnMemory owns its memfd and its mapping; it lives as long as its
// table's Storage. Clients' mappings keep the pages alive after the table is gone (the
// kernel frees them when the last mapping goes). Threading: io_context thread only.
#pragma once

#include <cstdint>
#include <memory>

#include "core/storage/column_memory.h"
#include "service/shm/memfd.h"

namespace replayd::service::shm {

class SharedColumnMemory final : public ColumnMemory {
 public:
  SharedColumnMemory(UniqueFd fd, Mapping mapping, std::uint64_t id)
      : fd_(std::move(fd)), mapping_(std::move(mapping)), id_(id) {}
  std::span<std::byte> bytes() const override { return mapping_.bytes(); }
  std::uint64_t id() const override { return id_; }
  // The memfd (read-write; sealed against resizing). Hand clients reopen_read_only(fd()).
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  Mapping mapping_;
  std::uint64_t id_;
};

class SharedColumnSource final : public ColumnMemorySource {
 public:
  // A sealed memfd of `bytes`, mapped shared; when the system refuses one (a file-size
  // limit, say), private memory, with a warning in the log. Errors: resource_exhausted
  // naming the table when even private memory is refused.
  Result<std::unique_ptr<ColumnMemory>> allocate(std::string_view table,
                                                 std::uint64_t bytes) override;

 private:
  // Ids start at a random point, so that a client cannot mistake a block of a restarted
  // server for the one it mapped before.
  std::uint64_t next_id_ = initial_id();
  static std::uint64_t initial_id();
};

// The memfd behind a table's column block, or nullptr when the block is private memory.
const SharedColumnMemory* shared_columns_of(const ColumnMemory& memory);

}  // namespace replayd::service::shm
