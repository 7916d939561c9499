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

// A memfd of `bytes` bytes (zero-filled; pages allocated when first written), close-on-exec,
// sealed with F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL. `name` shows in /proc/PID/maps.
// Errors: resource_exhausted naming what failed and the system's reason.
Result<UniqueFd> create_sealed_memfd(const std::string& name, std::uint64_t bytes);

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
