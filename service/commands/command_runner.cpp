#include "service/commands/command_runner.h"

#include <algorithm>

#include "service/commands/command_table.h"
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
  if (command.waits_on == WaitsOn::rate_limiter) {
    REPLAYD_ASSIGN_OR_RETURN(auto ms, request.optional_uint("timeout_ms"));
    if (ms && *ms > (std::uint64_t{1} << 40)) return request.error("timeout_ms", "is too large");
    if (ms) call.timeout = std::chrono::milliseconds(*ms);
  }
  return Ok{};
}

}  // namespace

Started start_command(ServiceContext& context, Frame frame, std::uint64_t connection) {
  const std::uint64_t id = frame.header.request_id;
  Started started;
  auto fail = [&](Reply reply) {
    started.result = std::move(reply);
    return std::move(started);
  };
  auto document = parse_json(frame.meta, "request metadata");
  if (!document) return fail(make_error_reply(id, document.error()));
  auto reader = JsonReader::of(*document, "");
  if (!reader) return fail(make_error_reply(id, reader.error()));
  JsonReader& request = *reader;
  auto op = request.string("op");
  if (!op) return fail(make_error_reply(id, op.error()));
  started.command = find_command(*op);
  if (context.shutting_down) {
    return fail(make_error_reply(id, WireError::shutting_down, "the server is shutting down"));
  }
  if (!started.command) {
    return fail(make_error_reply(id, WireError::invalid_argument,
                                 "unknown op '" + *op + "': expected one of " + known_ops()));
  }
  const Command& command = *started.command;

  Call call{context, id, request, frame, nullptr, 0, std::nullopt, connection};
  if (auto declared = check_declared(context, command, request, document->get_object(), call);
      !declared) {
    return fail(make_error_reply(id, declared.error()));
  }
  auto outcome = command.handler(call);
  if (!outcome) return fail(make_error_reply(id, outcome.error()));
  if (auto* reply = std::get_if<Reply>(&*outcome)) return fail(std::move(*reply));

  auto work = std::move(std::get<std::unique_ptr<Deferred>>(*outcome));
  WaitingRequest waiting{id, command.name, call.timeout};
  if (admitted_now(*work)) return fail(work->run());
  if (call.timeout && call.timeout->count() == 0) {
    return fail(refuse_without_waiting(waiting, *work));
  }
  started.result = Waiting{std::move(work), waiting};
  return started;
}

}  // namespace replayd::service
