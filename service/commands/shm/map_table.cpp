// `map_table` (docs/SHM.md): a table's column block for a same-host client to map read-only.
// The metadata gives the block's layout (core/storage/storage_layout.h), the reply carries
// the block's memfd reopened read-only as its one descriptor. Only for connections the
// plane is offered to, and tables whose fields are all fixed-size (frame fields travel in
// the frame).
#include <boost/json.hpp>

#include "core/dtype.h"
#include "service/commands/handlers.h"
#include "service/shm/connection_plane.h"
#include "service/shm/shared_columns.h"

namespace replayd::service::commands {
namespace json = boost::json;

asio::awaitable<Result<Reply>> map_table(Call& call) {
  if (call.plane == nullptr) {
    co_return make_error(ErrorCode::permission_denied, "map_table needs a client connection");
  }
  REPLAYD_CO_RETURN_IF_ERROR(call.plane->require_offered("map_table"));
  const Table& table = *call.table->table;
  if (table.schema().has_frames()) {
    co_return make_error(ErrorCode::failed_precondition,
                         "table '" + table.name() +
                             "' has frame fields (stacked, next_of or compressed): its rows are "
                             "not offered in shared memory; sample it through the socket");
  }
  if (table.config().max_times_sampled != 0) {
    co_return make_error(ErrorCode::failed_precondition,
                         "table '" + table.name() +
                             "' retires its items when sampled (max_times_sampled): a row "
                             "overwritten before a learner copied it could not be drawn again, "
                             "so it is sampled through the socket");
  }
  const Storage& storage = table.storage();
  const auto* shared = shm::shared_columns_of(storage.memory());
  if (shared == nullptr) {
    co_return make_error(ErrorCode::failed_precondition,
                         "table '" + table.name() + "' does not live in shared memory");
  }
  REPLAYD_CO_ASSIGN_OR_RETURN(auto hold, call.plane->hold_descriptor_reply());
  REPLAYD_CO_ASSIGN_OR_RETURN(UniqueFd read_only, shm::reopen_read_only(shared->fd()));
  const StorageLayout& layout = storage.layout();
  json::array columns;
  for (std::size_t f = 0; f < table.schema().size(); ++f) {
    const Field& field = table.schema().field(f);
    json::array shape;
    for (auto dim : field.shape)
      shape.push_back(dim);
    columns.push_back(json::object{{"name", field.name},
                                   {"dtype", std::string(dtype_name(field.dtype))},
                                   {"shape", std::move(shape)},
                                   {"offset", layout.column_offsets[f]},
                                   {"item_bytes", field.item_bytes()}});
  }
  Reply reply =
      reply_with(call, json::serialize(json::object{{"table", table.name()},
                                                    {"region", shared->id()},
                                                    {"bytes", layout.total_bytes},
                                                    {"capacity", storage.capacity()},
                                                    {"slot_bits", storage.slot_bits()},
                                                    {"stamps_offset", layout.stamps_offset},
                                                    {"columns", std::move(columns)},
                                                    {"descriptors", 1}}));
  reply.descriptors.push_back(std::move(read_only));
  reply.descriptor_hold = std::move(hold);
  call.plane->block_sent(shared->id(), layout.total_bytes);
  co_return reply;
}

}  // namespace replayd::service::commands
