#include "service/shm/shared_columns.h"

#include <spdlog/spdlog.h>

#include <random>
#include <string>

namespace replayd::service::shm {

Result<std::unique_ptr<ColumnMemory>> SharedColumnSource::allocate(std::string_view table,
                                                                   std::uint64_t bytes) {
  auto fd = create_memfd("replayd table " + std::string(table), bytes);
  Result<Mapping> mapping = fd ? Mapping::map(fd->get(), bytes) : Result<Mapping>(fd.error());
  // The server's mapping exists: from here on nobody else can map the block writable.
  const Status sealed = mapping ? seal_memfd(fd->get(), Writers::server_only) : Status(Ok{});
  if (!mapping || !sealed) {
    // A system that refuses the memfd (a file-size limit, no memfd support) still gets the
    // table, in private memory; only the plane is not offered for it, and the table's info,
    // the log and the metrics say so (never silently).
    std::string reason = !mapping ? mapping.error().message : sealed.error().message;
    spdlog::warn(
        "table '{}': its columns stay in private memory, not offered to shared-memory clients: "
        "{}",
        table, reason);
    REPLAYD_ASSIGN_OR_RETURN(auto memory, allocate_private_column_memory(table, bytes));
    return std::unique_ptr<ColumnMemory>(
        new RefusedSharedMemory(std::move(memory), std::move(reason)));
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

const std::string* plane_refusal_of(const ColumnMemory& memory) {
  const auto* refused = dynamic_cast<const RefusedSharedMemory*>(&memory);
  return refused ? &refused->reason() : nullptr;
}

}  // namespace replayd::service::shm
