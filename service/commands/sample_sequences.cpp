// `sample_sequences` (docs/PROTOCOL.md): n sequences of burn_in + length steps of one episode
// each, as (n, T, ...) columns with a mask. Runs once the table holds a valid start and the
// rate limiter admits it; a malformed request is refused at once, never parked, and so is a
// reply larger than max_frame_bytes, before anything is drawn. Frame fields go out as each
// sequence's unique frames (frame_columns.h).
#include <cmath>

#include "service/commands/handlers.h"
#include "service/protocol/pixel_frame_columns.h"
#include "service/protocol/sample_reply.h"
#include "service/waiting/admission.h"

namespace replayd::service::commands {
namespace {

// The per-sequence columns (leading dims [n]), the mask and the schema's fields but frame
// fields ([n, T]).
std::vector<ReplyColumn> sequence_columns(const Schema& schema, std::uint64_t n) {
  std::vector<ReplyColumn> columns = draw_columns({n});
  columns.push_back({"mask", "uint8", {}, 1, {}});
  for (const auto& field : schema.fields()) {
    if (!field.is_frame()) columns.push_back(field_column(field));
  }
  return columns;
}

}  // namespace

asio::awaitable<Result<Reply>> sample_sequences(Call& call) {
  Table& table = *call.table->table;
  EpisodicTable& episodic = call.episodic();
  REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t length, call.args.uint("length"));
  REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t stride, call.args.uint_or("stride", 1));
  REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t burn_in, call.args.uint_or("burn_in", 0));
  REPLAYD_CO_ASSIGN_OR_RETURN(bool pad, call.args.boolean_or("pad", false));
  REPLAYD_CO_ASSIGN_OR_RETURN(double beta, call.args.number_or("beta", 0.4));
  REPLAYD_CO_ASSIGN_OR_RETURN(bool raw, call.args.boolean_or("raw", false));
  const std::uint64_t max_steps = call.service.limits.max_sequence_steps;
  if (burn_in > max_steps || length > max_steps - burn_in) {
    co_return call.args.error("length", "burn_in " + std::to_string(burn_in) + " + length " +
                                            std::to_string(length) +
                                            " exceeds max_sequence_steps = " +
                                            std::to_string(call.service.limits.max_sequence_steps) +
                                            " (the server's limits)");
  }
  // n <= max_batch_items <= 2^31 and burn_in + length <= 2^24: no overflow.
  if (call.n * (burn_in + length) > call.service.limits.max_sequence_sample_steps) {
    co_return make_error(
        ErrorCode::invalid_argument,
        "n x (burn_in + length) = " + std::to_string(call.n) + " x " +
            std::to_string(burn_in + length) + " = " + std::to_string(call.n * (burn_in + length)) +
            " steps to read exceeds max_sequence_sample_steps = " +
            std::to_string(call.service.limits.max_sequence_sample_steps) +
            " (the server's limits); sample fewer or shorter sequences per request");
  }
  const std::uint64_t capacity = table.config().capacity;
  if (length == 0 || burn_in > capacity || length > capacity - burn_in) {
    co_return call.args.error(
        "length", "length " + std::to_string(length) + " + burn_in " + std::to_string(burn_in) +
                      " must be between 1 and the capacity " + std::to_string(capacity));
  }
  if (stride == 0 || stride > capacity) {
    co_return call.args.error("stride",
                              "must be between 1 and the capacity " + std::to_string(capacity));
  }
  SequenceRequest request{static_cast<std::uint32_t>(length), static_cast<std::uint32_t>(stride),
                          static_cast<std::uint32_t>(burn_in), pad, beta};
  // Validates beta, and builds the window index of this request (once).
  if (auto starts = episodic.sequence_starts(request); !starts) co_return starts.error();
  std::uint64_t reply_bytes = ColumnReply::frame_bytes(sequence_columns(table.schema(), call.n),
                                                       {call.n, burn_in + length});
  for (const auto& field : table.schema().fields()) {
    if (field.is_frame())  // T + stack - 1 frames per sequence
      reply_bytes += frame_columns_bound(field, call.n * (burn_in + length + field.stack - 1));
  }
  if (reply_bytes > call.service.limits.max_frame_bytes) {
    co_return make_error(ErrorCode::resource_exhausted,
                         "table '" + table.name() + "': " + std::to_string(call.n) +
                             " sequences of " + std::to_string(burn_in + length) +
                             " steps would be a reply of " + std::to_string(reply_bytes) +
                             " bytes, more than max_frame_bytes = " +
                             std::to_string(call.service.limits.max_frame_bytes) +
                             "; sample fewer or shorter sequences per request");
  }

  REPLAYD_CO_RETURN_IF_ERROR(co_await admit_when(
      call, call.table->sample_waiters,
      [&] { return episodic.may_sample_sequences(call.n, request); },
      "no valid sequence start yet, or the rate limiter does not admit this sample now"));

  const std::uint64_t steps = std::uint64_t{request.burn_in} + request.length;
  auto reply = ColumnReply::create(sequence_columns(table.schema(), call.n), {call.n, steps});
  if (!reply) co_return reply.error();
  const Schema& schema = table.schema();
  std::vector<std::span<std::byte>> columns;
  std::size_t next_column = 5;
  for (std::size_t f = 0; f < schema.size(); ++f) {
    if (schema.field(f).is_frame()) {
      columns.emplace_back();
    } else {
      columns.push_back(reply->column(next_column++));
    }
  }
  std::vector<std::vector<std::uint32_t>> frames(schema.has_frames() ? schema.size() : 0);
  SequenceBuffers buffers{reply->as<std::uint64_t>(0),
                          reply->as<double>(1),
                          reply->as<double>(2),
                          reply->as<std::uint32_t>(3),
                          columns,
                          reply->as<std::uint8_t>(4),
                          frames};
  std::vector<ColdDraw> cold;
  if (call.table->tier) buffers.cold = &cold;
  auto state = episodic.sequence_state(request);
  if (!state) co_return state.error();
  call.table->table->set_now_ms(replay_now_ms());
  REPLAYD_CO_RETURN_IF_ERROR(episodic.sample_sequences(call.n, request, buffers));
  // The frames (in RAM) before anything suspends: a slot may hold another step once the
  // request waits for its cold reads.
  Result<std::string> frames_added = add_draw_frame_columns(*reply, table, frames, raw);
  if (!cold.empty() && frames_added) {  // read back from the file tier, suspended meanwhile
    // add_draw_frame_columns extended the reply, which moved its columns: their spans again.
    std::size_t column = 5;
    for (std::size_t f = 0; f < schema.size(); ++f)
      if (!schema.field(f).is_frame()) columns[f] = reply->column(column++);
    std::shared_ptr<FileTier> tier = call.table->tier;
    const Status read = co_await tier->read_cold_into(table, cold, columns);
    table_changed(*call.table);
    REPLAYD_CO_RETURN_IF_ERROR(read);
  } else {
    table_changed(*call.table);
  }
  REPLAYD_CO_ASSIGN_OR_RETURN(std::string frame_meta, std::move(frames_added));
  co_return reply->finish(call.request_id, ",\"length\":" + std::to_string(request.length) +
                                               ",\"burn_in\":" + std::to_string(request.burn_in) +
                                               sampled_state(state->starts, state->mass) +
                                               frame_meta);
}

}  // namespace replayd::service::commands
