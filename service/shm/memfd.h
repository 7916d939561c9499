// Sealed memory files (memfd) and their mappings: what the shared-memory data plane is made
// of (docs/SHM.md). Every memfd is sized once and sealed against growing and shrinking
// before any client gets it, so no client can make the server's next access fault (SIGBUS).
// Threading: none; each call is one or two system calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/result.h"
#include "service/protocol/unique_fd.h"

namespace replayd::service::shm {

// Who may write a memfd once it is sealed (seal_memfd).
enum class Writers {
  anyone,      // a staging arena: the client writes it, the server only reads it
  server_only  // a table's block: F_SEAL_FUTURE_WRITE, so that no new writable mapping and
               // no write() can be made, by anyone, through any descriptor of the file
               // (reopening /proc/PID/fd/N read-write included); mappings made before the
               // seal (the server's own) keep writing
};

// A memfd of `bytes` bytes (zero-filled; pages allocated when first written), close-on-exec,
// sealed with F_SEAL_SHRINK | F_SEAL_GROW; seal_memfd finishes the seals once the server
// has mapped it. `name` shows in /proc/PID/maps. Errors: resource_exhausted naming what
// failed and the system's reason.
Result<UniqueFd> create_memfd(const std::string& name, std::uint64_t bytes);

// Adds the last seals: F_SEAL_FUTURE_WRITE when only the server writes, then F_SEAL_SEAL
// (no seal may be added or removed afterwards). Call after the server's own mapping.
Status seal_memfd(int fd, Writers writers);

// A new descriptor of the same file opened read-only (through /proc/self/fd), which a
// receiver can map only without PROT_WRITE. Errors: resource_exhausted.
Result<UniqueFd> reopen_read_only(int fd);

// A descriptor of the same open file (dup, close-on-exec), for a reply to own.
Result<UniqueFd> duplicate(int fd);

// A MAP_SHARED mapping, read and write, unmapped when destroyed. Move-only.
class Mapping {
 public:
  Mapping() = default;
  // Maps the first `bytes` bytes of `fd`. Errors: resource_exhausted.
  static Result<Mapping> map(int fd, std::uint64_t bytes);
  // The same without PROT_WRITE (a block sealed with F_SEAL_WRITE); bytes() must then only
  // be read.
  static Result<Mapping> map_read_only(int fd, std::uint64_t bytes);
  ~Mapping();
  Mapping(Mapping&& other) noexcept;
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  std::span<std::byte> bytes() const { return {data_, size_}; }

 private:
  Mapping(std::byte* data, std::size_t size) : data_(data), size_(size) {}
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace replayd::service::shm
