#include "service/dispatch.h"

#include "service/ops.h"
#include "service/snapshot_op.h"

namespace replayd::service {
namespace {

Reply reply_of(std::uint64_t request_id, Result<std::string> result) {
  if (!result) return make_error_reply(request_id, result.error());
  return make_reply(request_id, std::move(result).value());
}

}  // namespace

void table_changed(HostedTable& table) {
  table.sample_waiters.wake_front();
  table.insert_waiters.wake_front();
}

Dispatched dispatch(ServiceContext& context, Frame frame, metrics::RequestOp* op_out) {
  const std::uint64_t id = frame.header.request_id;
  auto document = parse_json(frame.meta, "request metadata");
  if (!document) return make_error_reply(id, document.error());
  auto reader_result = JsonReader::of(*document, "");
  if (!reader_result) return make_error_reply(id, reader_result.error());
  JsonReader& request = *reader_result;
  auto op_result = request.string("op");
  if (!op_result) return make_error_reply(id, op_result.error());
  const std::string& op = *op_result;
  if (op_out) *op_out = metrics::request_op_of(op);

  if (context.shutting_down) {
    return make_error_reply(id, WireError::shutting_down, "the server is shutting down");
  }
  if (op == "insert") {
    auto prepared = prepare_insert(context, request, frame);
    if (!prepared) return make_error_reply(id, prepared.error());
    prepared->frame = std::move(frame);
    return std::move(prepared).value();
  }
  if (op == "sample") {
    auto prepared = prepare_sample(context, request);
    if (!prepared) return make_error_reply(id, prepared.error());
    prepared->request_id = id;
    return std::move(prepared).value();
  }
  if (op == "update_priorities") return reply_of(id, op_update_priorities(context, request, frame));
  if (op == "delete") return reply_of(id, op_delete(context, request, frame));
  if (op == "snapshot") {
    auto prepared = prepare_snapshot(context, request);
    if (!prepared) return make_error_reply(id, prepared.error());
    prepared->request_id = id;
    return std::move(prepared).value();
  }
  if (op == "hello") return reply_of(id, op_hello(context, request));
  if (op == "ping") return reply_of(id, op_ping(context, request));
  if (op == "info") return reply_of(id, op_info(context, request));
  if (op == "list_tables") return reply_of(id, op_list_tables(context, request));
  if (op == "create_table") return reply_of(id, op_create_table(context, request));
  if (op == "drop_table") return reply_of(id, op_drop_table(context, request));
  if (op == "reset_table") return reply_of(id, op_reset_table(context, request));
  return make_error_reply(
      id, WireError::invalid_argument,
      "unknown op '" + op +
          "': expected hello, ping, info, list_tables, create_table, "
          "drop_table, reset_table, insert, sample, update_priorities, delete or "
          "snapshot");
}

}  // namespace replayd::service
