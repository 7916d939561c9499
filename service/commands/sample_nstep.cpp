// `sample` with "nstep" (docs/PROTOCOL.md, "n-step samples"): n draws of start steps of an
// episodic table, each with its k-step return in place of the reward field and the bootstrap
// fields' values h steps on. Runs once the table holds a valid start and the rate limiter
// admits it; a malformed request (k, gamma) is refused at once, never parked. Frame fields
// (stacks, next_of, compressed values) follow the other columns (frame_columns.h).
#include <algorithm>

#include "service/commands/handlers.h"
#include "service/commands/table_kind.h"
#include "service/protocol/pixel_frame_columns.h"
#include "service/protocol/sample_reply.h"
#include "service/waiting/admission.h"

namespace replayd::service::commands {
namespace {

// Whether the n-step reply takes field f's values from the draws' rows (not the reward or
// a bootstrap field, whose columns receive computed values).
bool takes_own_value(const Schema& schema, const EpisodeConfig& episodes, std::size_t f) {
  const auto& bootstrap = episodes.bootstrap_fields;
  return schema.field(f).name != episodes.reward_field &&
         std::find(bootstrap.begin(), bootstrap.end(), schema.field(f).name) == bootstrap.end();
}

// The per-draw columns, the schema's fields but frame fields, then discount and steps. With
// n given, large fields that take their own values are viewed in place (viewed_fields),
// unless the table has a file tier (its cold steps are read into the reply).
std::vector<ReplyColumn> nstep_columns(const Schema& schema, const EpisodeConfig& episodes,
                                       std::uint64_t n = 0, bool tiered = false) {
  const std::vector<bool> viewed =
      n > 0 && !tiered ? viewed_fields(schema, n) : std::vector<bool>(schema.size(), false);
  std::vector<ReplyColumn> columns = draw_columns();
  for (std::size_t f = 0; f < schema.size(); ++f) {
    if (schema.field(f).is_frame()) continue;
    columns.push_back(
        field_column(schema.field(f), viewed[f] && takes_own_value(schema, episodes, f)));
  }
  columns.push_back({"discount", "float64", {}, 8, {}});
  columns.push_back({"steps", "uint32", {}, 4, {}});
  return columns;
}

}  // namespace

asio::awaitable<Result<Reply>> sample_nstep(Call& call, std::uint64_t k, double beta) {
  Table& table = *call.table->table;
  REPLAYD_CO_ASSIGN_OR_RETURN(double gamma, call.args.number_or("gamma", 1.0));
  REPLAYD_CO_ASSIGN_OR_RETURN(bool raw, call.args.boolean_or("raw", false));
  REPLAYD_CO_RETURN_IF_ERROR(check_table_kind(table, TableKind::episodic, "sample with \"nstep\""));
  EpisodicTable& episodic = call.episodic();
  if (k > call.service.limits.max_nstep) {
    co_return call.args.error("nstep", std::to_string(k) + " exceeds max_nstep = " +
                                           std::to_string(call.service.limits.max_nstep) +
                                           " (the server's limits)");
  }
  if (call.n * k > call.service.limits.max_nstep_walk_steps) {  // n <= 2^31, k <= 2^24
    co_return call.args.error(
        "nstep", "n x nstep = " + std::to_string(call.n) + " x " + std::to_string(k) + " = " +
                     std::to_string(call.n * k) + " steps to walk exceeds max_nstep_walk_steps = " +
                     std::to_string(call.service.limits.max_nstep_walk_steps) +
                     " (the server's limits): sample fewer transitions per request");
  }
  if (k == 0 || k > table.config().capacity) {
    co_return call.args.error("nstep", "must be between 1 and the capacity " +
                                           std::to_string(table.config().capacity) + ", got " +
                                           std::to_string(k));
  }
  NStepRequest request{static_cast<std::uint32_t>(k), gamma, beta};
  // Validates gamma and beta, and builds the window index of k (O(capacity * k), once).
  if (auto starts = episodic.nstep_starts(request); !starts) co_return starts.error();
  std::uint64_t reply_bytes =
      ColumnReply::frame_bytes(nstep_columns(table.schema(), table.config().episodes), {call.n});
  for (const auto& field : table.schema().fields()) {
    // At most stack + min(k, stack) frames per draw (frame_layout).
    if (!field.is_frame()) continue;
    const std::uint64_t per_draw =
        field.stack + (field.next_of ? std::min<std::uint64_t>(k, field.stack) : 0);
    reply_bytes += frame_columns_bound(field, call.n * per_draw);
  }
  if (reply_bytes > call.service.limits.max_frame_bytes) {
    co_return make_error(ErrorCode::resource_exhausted,
                         "table '" + table.name() + "': an n-step sample of n = " +
                             std::to_string(call.n) + " would be a reply of " +
                             std::to_string(reply_bytes) + " bytes, more than max_frame_bytes = " +
                             std::to_string(call.service.limits.max_frame_bytes) +
                             "; sample fewer items per request");
  }

  REPLAYD_CO_RETURN_IF_ERROR(co_await admit_when(
      call, call.table->sample_waiters, [&] { return episodic.may_sample_nstep(call.n, request); },
      "no valid n-step start yet, or the rate limiter does not admit this sample now"));

  const Schema& schema = table.schema();
  const auto& episodes = table.config().episodes;
  const bool tiered = call.table->tier != nullptr;
  const std::vector<ReplyColumn> reply_columns = nstep_columns(schema, episodes, call.n, tiered);
  auto reply = ColumnReply::create(reply_columns, {call.n});
  if (!reply) co_return reply.error();
  // Step t's own fields go straight into the reply, except the reward and bootstrap fields,
  // whose reply columns receive the return and the bootstrap values instead.
  // Reply column of each field that is not a frame field.
  std::vector<std::size_t> column_of(schema.size(), 0);
  std::size_t next_column = 4;
  for (std::size_t f = 0; f < schema.size(); ++f)
    if (!schema.field(f).is_frame()) column_of[f] = next_column++;
  const int reward = schema.find(episodes.reward_field);
  std::vector<std::vector<std::byte>> scratch;
  std::vector<std::span<std::byte>> columns;
  std::vector<std::span<const std::byte*>> rows(schema.size());  // of the viewed fields
  std::vector<std::span<std::byte>> bootstrap;
  for (const auto& name : episodes.bootstrap_fields)
    bootstrap.push_back(reply->column(column_of[static_cast<std::size_t>(schema.find(name))]));
  scratch.reserve(schema.size());
  for (std::size_t f = 0; f < schema.size(); ++f) {
    const bool replaced = !takes_own_value(schema, episodes, f);
    if (schema.field(f).is_frame()) {
      columns.emplace_back();
    } else if (reply_columns[column_of[f]].viewed) {
      columns.emplace_back();
      rows[f] = reply->rows(column_of[f]);
    } else if (replaced) {
      scratch.emplace_back(call.n * schema.field(f).item_bytes());
      columns.emplace_back(scratch.back());
    } else {
      columns.push_back(reply->column(column_of[f]));
    }
  }
  std::vector<std::vector<std::uint32_t>> frames(schema.has_frames() ? schema.size() : 0);
  NStepBuffers buffers{{reply->as<std::uint64_t>(0), reply->as<double>(1), reply->as<double>(2),
                        reply->as<std::uint32_t>(3), columns, rows},
                       reply->column(column_of[static_cast<std::size_t>(reward)]),
                       bootstrap,
                       reply->as<double>(next_column),
                       reply->as<std::uint32_t>(next_column + 1),
                       frames};
  std::vector<ColdDraw> cold;
  if (tiered) buffers.base.cold = &cold;
  auto state = episodic.nstep_state(request);
  if (!state) co_return state.error();
  call.table->table->set_now_ms(replay_now_ms());
  REPLAYD_CO_RETURN_IF_ERROR(episodic.sample_nstep(call.n, request, buffers));
  // The frames are the stored values of the slots just drawn (in RAM: a file tier leaves
  // frame fields there): taken before anything suspends, since a slot may hold another step
  // once the request waits for its cold reads.
  Result<std::string> frame_meta = add_draw_frame_columns(*reply, table, frames, raw);
  if (!cold.empty() && frame_meta) {
    // add_draw_frame_columns extended the reply, which moved its columns: their spans again.
    for (std::size_t f = 0; f < schema.size(); ++f)
      if (!columns[f].empty() && takes_own_value(schema, episodes, f))
        columns[f] = reply->column(column_of[f]);
    for (std::size_t b = 0; b < bootstrap.size(); ++b) {
      const auto field = static_cast<std::size_t>(schema.find(episodes.bootstrap_fields[b]));
      bootstrap[b] = reply->column(column_of[field]);
    }
    // Suspends while the pool reads them (steps t into the columns, bootstrap steps into the
    // bootstrap columns); the segments are taken before table_changed may delete any.
    std::shared_ptr<FileTier> tier = call.table->tier;
    const Status read = co_await tier->read_cold_into(table, cold, columns, bootstrap);
    table_changed(*call.table);
    REPLAYD_CO_RETURN_IF_ERROR(read);
  } else {
    table_changed(*call.table);
  }
  if (!frame_meta) co_return frame_meta.error();
  co_return reply->finish(call.request_id, ",\"nstep\":" + std::to_string(request.k) +
                                               sampled_state(state->starts, state->mass) +
                                               *frame_meta);
}

}  // namespace replayd::service::commands
