// Tables' column blocks in shared memory: the ColumnMemorySource the server gives every
// table when the data plane is on (config `shared_memory`), so that same-host clients can
// map a table's stamps and columns read-only (`map_table`, docs/SHM.md).
// Ownership: a SharedColumnMemory owns its memfd and its mapping; it lives as long as its
// table's Storage. Clients' mappings keep the pages alive after the table is gone (the
// kernel frees them when the last mapping goes). Threading: SharedColumnSource::allocate may
// be called from any thread (a large table is created off the io_context thread); the rest
// on the io_context thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/storage/column_memory.h"
#include "service/shm/memfd.h"

namespace replayd::service::shm {

class SharedColumnMemory final : public ColumnMemory {
 public:
  SharedColumnMemory(UniqueFd fd, Mapping mapping, std::uint64_t id)
      : fd_(std::move(fd)), mapping_(std::move(mapping)), id_(id) {}
  std::span<std::byte> bytes() const override { return mapping_.bytes(); }
  std::uint64_t id() const override { return id_; }
  // The memfd (sealed against resizing and, but for the server's own mapping, against
  // writing: Writers::server_only). Hand clients reopen_read_only(fd()).
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  Mapping mapping_;
  std::uint64_t id_;
};

// Private memory a table got because the system refused it shared memory, and why: the
// table is then off the plane, which its info, the log and the metrics say.
class RefusedSharedMemory final : public ColumnMemory {
 public:
  RefusedSharedMemory(std::unique_ptr<ColumnMemory> memory, std::string reason)
      : memory_(std::move(memory)), reason_(std::move(reason)) {}
  std::span<std::byte> bytes() const override { return memory_->bytes(); }
  const std::string& reason() const { return reason_; }

 private:
  std::unique_ptr<ColumnMemory> memory_;
  std::string reason_;
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
  std::atomic<std::uint64_t> next_id_{initial_id()};
  static std::uint64_t initial_id();
};

// The memfd behind a table's column block, or nullptr when the block is private memory.
const SharedColumnMemory* shared_columns_of(const ColumnMemory& memory);
// Why a table that asked for shared memory got private memory; nullptr when it did not
// (shared memory, or a server with the plane off).
const std::string* plane_refusal_of(const ColumnMemory& memory);

}  // namespace replayd::service::shm
