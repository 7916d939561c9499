#include "service/shm/memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/storage/column_memory.h"

namespace replayd::service::shm {
namespace {

Error system_error(const std::string& what) {
  return make_error(ErrorCode::resource_exhausted, what + ": " + std::strerror(errno));
}

}  // namespace

Result<UniqueFd> create_memfd(const std::string& name, std::uint64_t bytes) {
  UniqueFd fd(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return system_error("memfd_create for '" + name + "' failed");
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    return system_error("sizing the memfd for '" + name + "' to " + std::to_string(bytes) +
                        " bytes failed");
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    return system_error("sealing the memfd for '" + name + "' failed");
  }
  return fd;
}

Status seal_memfd(int fd, Writers writers) {
  const int seals = (writers == Writers::server_only ? F_SEAL_FUTURE_WRITE : 0) | F_SEAL_SEAL;
  if (::fcntl(fd, F_ADD_SEALS, seals) != 0) return system_error("sealing a memfd failed");
  return Ok{};
}

Result<UniqueFd> reopen_read_only(int fd) {
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  UniqueFd read_only(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!read_only.valid()) return system_error("reopening " + path + " read-only failed");
  return read_only;
}

Result<UniqueFd> duplicate(int fd) {
  UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!copy.valid()) return system_error("duplicating a descriptor failed");
  return copy;
}

Result<Mapping> Mapping::map_read_only(int fd, std::uint64_t bytes) {
  void* data = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    return system_error("mapping " + std::to_string(bytes) + " bytes of shared memory failed");
  }
  return Mapping(static_cast<std::byte*>(data), bytes);
}

Result<Mapping> Mapping::map(int fd, std::uint64_t bytes) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    return system_error("mapping " + std::to_string(bytes) + " bytes of shared memory failed");
  }
  return Mapping(static_cast<std::byte*>(data), bytes);
}

Mapping::~Mapping() {
  if (data_ != nullptr) unmap_in_pieces(data_, size_);  // a table's block may be gigabytes
}

Mapping::Mapping(Mapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) unmap_in_pieces(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace replayd::service::shm
