#include "core/storage/column_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace replayd {
namespace {

// An anonymous private mapping: zero-filled, page-aligned, its pages allocated when first
// written.
class PrivateColumnMemory final : public ColumnMemory {
 public:
  PrivateColumnMemory(std::byte* data, std::size_t size) : data_(data), size_(size) {}
  ~PrivateColumnMemory() override { unmap_in_pieces(data_, size_); }
  PrivateColumnMemory(const PrivateColumnMemory&) = delete;
  PrivateColumnMemory& operator=(const PrivateColumnMemory&) = delete;
  std::span<std::byte> bytes() const override { return {data_, size_}; }

 private:
  std::byte* data_;
  std::size_t size_;
};

constexpr std::size_t kUnmapPieceBytes = std::size_t{64} << 20;

}  // namespace

void unmap_in_pieces(std::byte* data, std::size_t bytes) {
  for (std::size_t offset = 0; offset < bytes; offset += kUnmapPieceBytes)
    ::madvise(data + offset, std::min(kUnmapPieceBytes, bytes - offset), MADV_DONTNEED);
  ::munmap(data, bytes);
}

void ColumnMemory::discard(std::uint64_t offset, std::uint64_t length) const {
  std::byte* at = bytes().data() + offset;
  // MADV_REMOVE frees the pages of a shared mapping; a private one refuses it (EINVAL) and
  // MADV_DONTNEED frees its pages.
  if (::madvise(at, length, MADV_REMOVE) != 0) ::madvise(at, length, MADV_DONTNEED);
}

Result<std::unique_ptr<ColumnMemory>> allocate_private_column_memory(std::string_view table,
                                                                     std::uint64_t bytes) {
  if (bytes == 0 || bytes > SIZE_MAX) {
    return make_error(ErrorCode::resource_exhausted, "table '" + std::string(table) +
                                                         "': cannot map " + std::to_string(bytes) +
                                                         " bytes of column memory");
  }
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) {
    return make_error(ErrorCode::resource_exhausted,
                      "table '" + std::string(table) + "': mapping " + std::to_string(bytes) +
                          " bytes of column memory failed: " + std::strerror(errno));
  }
  return std::unique_ptr<ColumnMemory>(
      new PrivateColumnMemory(static_cast<std::byte*>(data), bytes));
}

}  // namespace replayd
