#include "service/commands/dispatch.h"

#include <algorithm>
#include <cstddef>
#include <new>

#include "service/commands/command_table.h"
#include "service/commands/table_kind.h"
#include "service/protocol/json_reader.h"

namespace replayd::service {
namespace {

std::string known_ops() {
  std::string names;
  for (const Command& command : command_table()) {
    if (!names.empty()) names += ", ";
    names += command.name;
  }
  return names;
}

// The checks every entry declares, in the order a request's keys are read.
Status check_declared(ServiceContext& context, const Command& command, JsonReader& request,
                      const boost::json::object& object, Call& call) {
  for (const auto& [key, _] : object) {
    if (key == "op") continue;
    if (std::find(command.fields.begin(), command.fields.end(), std::string_view(key)) ==
        command.fields.end()) {
      return request.error(key, "unknown key for op '" + std::string(command.name) + "'");
    }
  }
  if (!command.takes_payload && !call.frame.payload.empty()) {
    return make_error(ErrorCode::invalid_argument,
                      "op '" + std::string(command.name) + "' takes no payload; this request " +
                          "carries " + std::to_string(call.frame.payload.size()) + " bytes");
  }
  if (command.needs_table) {
    REPLAYD_ASSIGN_OR_RETURN(std::string name, request.string("table"));
    call.table = context.tables.find(name);
    if (!call.table) return make_error(ErrorCode::not_found, "table '" + name + "' does not exist");
    REPLAYD_RETURN_IF_ERROR(check_table_kind(*call.table->table, command.table_kind, command.name));
  }
  if (command.batch) {
    REPLAYD_ASSIGN_OR_RETURN(call.n, request.uint("n"));
    if (call.n == 0) return request.error("n", "must be >= 1");
    if (call.n > context.limits.max_batch_items) {
      return make_error(ErrorCode::resource_exhausted,
                        "n: " + std::to_string(call.n) + " exceeds max_batch_items = " +
                            std::to_string(context.limits.max_batch_items));
    }
  }
  if (command.waits_on == WaitsOn::rate_limiter || command.waits_on == WaitsOn::value) {
    REPLAYD_ASSIGN_OR_RETURN(auto ms, request.optional_uint("timeout_ms"));
    if (ms && *ms > (std::uint64_t{1} << 40)) return request.error("timeout_ms", "is too large");
    if (ms) call.timeout = std::chrono::milliseconds(*ms);
  }
  return Ok{};
}

Reply out_of_memory(std::uint64_t request_id) {
  return make_error_reply(request_id, WireError::resource_exhausted,
                          "the server is out of memory for this request; nothing was changed");
}

}  // namespace

asio::awaitable<Dispatched> dispatch(ServiceContext& context, WireFrame frame,
                                     RequestOrigin origin) {
  const std::uint64_t id = frame.header.request_id;
  Dispatched done{context.metrics.unknown_op(), std::nullopt};
  // The request's JSON lives in this frame's arena (its first 1 KiB inline, more from the
  // heap in growing blocks) rather than one allocation per value; declared before the
  // document, the arena outlives it. Nothing keeps a copy of the request past this frame.
  // The frame lives as long as the request, parked ones too (Parking::kBytesPerParkedRequest).
  alignas(std::max_align_t) unsigned char arena_bytes[1024];
  boost::json::monotonic_resource arena(arena_bytes, sizeof arena_bytes);
  auto document = parse_json(frame.meta, "request metadata", &arena);
  if (!document) co_return Dispatched{done.op, make_error_reply(id, document.error())};
  auto reader = JsonReader::of(*document, "");
  if (!reader) co_return Dispatched{done.op, make_error_reply(id, reader.error())};
  JsonReader& request = *reader;
  auto op = request.string("op");
  if (!op) co_return Dispatched{done.op, make_error_reply(id, op.error())};
  const Command* command = find_command(*op);
  if (command) done.op = command_index(*command);
  if (context.shutting_down) {
    co_return Dispatched{
        done.op, make_error_reply(id, WireError::shutting_down, "the server is shutting down")};
  }
  if (!command) {
    co_return Dispatched{
        done.op, make_error_reply(id, WireError::invalid_argument,
                                  "unknown op '" + *op + "': expected one of " + known_ops())};
  }
  if (origin.on_command) origin.on_command(origin.connection, *command);

  Call call{context, id, command->name, done.op,       request,        frame,
            nullptr, 0,  std::nullopt,  origin.writer, origin.parking, origin.plane};
  if (auto declared = check_declared(context, *command, request, document->get_object(), call);
      !declared) {
    co_return Dispatched{done.op, make_error_reply(id, declared.error())};
  }
  std::optional<Result<Reply>> result;
  try {
    result.emplace(co_await command->handler(call));
  } catch (const std::bad_alloc&) {
    co_return Dispatched{done.op, out_of_memory(id)};
  }
  done.shared_bytes = call.shared_bytes;
  if (!call.reply_wanted) co_return done;
  if (!*result) {
    co_return Dispatched{done.op, make_error_reply(id, result->error()), call.shared_bytes};
  }
  co_return Dispatched{done.op, std::move(*result).value(), call.shared_bytes};
}

}  // namespace replayd::service
