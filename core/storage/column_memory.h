// ColumnMemory: the one block of bytes a Storage keeps its per-slot stamps and its fixed-size
// columns in (core/storage/storage_layout.h says where each lies), and ColumnMemorySource,
// where such blocks come from. core/ asks a source and never learns what backs the bytes:
// private memory by default; the server passes shared memory that same-host clients map
// read-only (service/shm/, docs/SHM.md).
// Ownership: a Storage owns its ColumnMemory; the bytes stay at one address until it is
// destroyed. Threading: not thread-safe; the server uses them from its io_context thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "core/result.h"

namespace replayd {

class ColumnMemory {
 public:
  virtual ~ColumnMemory() = default;
  // The block: page-aligned, zero-filled when allocated (pages never written cost no
  // memory), fixed in size and address for the object's lifetime.
  virtual std::span<std::byte> bytes() const = 0;
  // A number that names this block among every block of the process, never reused (0 for
  // private memory): clients tell a table's mapping from the one of a table that replaced it.
  virtual std::uint64_t id() const { return 0; }
  // Gives the pages of bytes [offset, offset + length) back to the system: they read as
  // zeros afterwards and cost no memory until written. Precondition: page-aligned, within
  // bytes(). Shared memory frees its pages (MADV_REMOVE), private memory drops them
  // (MADV_DONTNEED). Never blocks on disk.
  void discard(std::uint64_t offset, std::uint64_t length) const;
};

// Unmaps [data, data + bytes): first drops its pages a piece at a time (MADV_DONTNEED, which
// holds the process's memory map only for reading), so that the munmap itself, which holds it
// for writing, has no pages left to free. Other threads' page faults and mappings wait at
// most one piece (64 MiB) instead of the whole block (25 ms for 2 GiB). Blocks for as long
// as freeing the pages takes: call it off the io_context thread for large blocks.
void unmap_in_pieces(std::byte* data, std::size_t bytes);

class ColumnMemorySource {
 public:
  virtual ~ColumnMemorySource() = default;
  // A zero-filled block of `bytes` bytes (>= 1) for the table named `table`.
  // Errors: resource_exhausted naming the table and the reason the system gave.
  virtual Result<std::unique_ptr<ColumnMemory>> allocate(std::string_view table,
                                                         std::uint64_t bytes) = 0;
};

// Private anonymous memory (mmap): what a table gets unless it is given a source.
// Errors: resource_exhausted when the system refuses the mapping.
Result<std::unique_ptr<ColumnMemory>> allocate_private_column_memory(std::string_view table,
                                                                     std::uint64_t bytes);

}  // namespace replayd
