#include "service/shm/shared_columns.h"

#include <spdlog/spdlog.h>

#include <random>
#include <string>

namespace replayd::service::shm {

Result<std::unique_ptr<ColumnMemory>> SharedColumnSource::allocate(std::string_view table,
                                                                   std::uint64_t bytes) {
  auto fd = create_sealed_memfd("replayd table " + std::string(table), bytes);
  Result<Mapping> mapping = fd ? Mapping::map(fd->get(), bytes) : Result<Mapping>(fd.error());
  if (!mapping) {
    // A system that refuses the memfd (a file-size limit, no memfd support) still gets the
    // table, in private memory; only the plane is not offered for it.
    spdlog::warn(
        "table '{}': its columns stay in private memory, not offered to shared-memory clients: "
        "{}",
        table, mapping.error().message);
    return allocate_private_column_memory(table, bytes);
  }
  return std::unique_ptr<ColumnMemory>(
      new SharedColumnMemory(std::move(fd).value(), std::move(mapping).value(), next_id_++));
}

std::uint64_t SharedColumnSource::initial_id() {
  std::random_device device;
  // 2^52 at most: the id stays exact in a client's JSON number.
  return ((std::uint64_t{device()} << 32 | device()) & ((std::uint64_t{1} << 52) - 1)) + 1;
}

const SharedColumnMemory* shared_columns_of(const ColumnMemory& memory) {
  return dynamic_cast<const SharedColumnMemory*>(&memory);
}

}  // namespace replayd::service::shm
