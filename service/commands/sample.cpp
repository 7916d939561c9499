// `sample` (docs/PROTOCOL.md): n draws with the table's selector; runs once the table holds
// enough items and the rate limiter admits it, in arrival order behind the table's earlier
// samples. A reply larger than max_frame_bytes is refused
// before anything is drawn. With "nstep" it draws n-step transitions of an episodic table
// (service/commands/sample_nstep.cpp); without, so does a table with frame fields (k = 1).
#include <cmath>

#include "service/commands/handlers.h"
#include "service/protocol/sample_reply.h"
#include "service/waiting/admission.h"

namespace replayd::service::commands {

asio::awaitable<Result<Reply>> sample(Call& call) {
  Table& table = *call.table->table;
  REPLAYD_CO_ASSIGN_OR_RETURN(double beta, call.args.number_or("beta", 0.4));
  if (!std::isfinite(beta) || beta < 0)
    co_return call.args.error("beta", "must be finite and >= 0");
  REPLAYD_CO_ASSIGN_OR_RETURN(auto nstep, call.args.optional_uint("nstep"));
  if (nstep) co_return co_await sample_nstep(call, *nstep, beta);
  // A table with frame fields holds steps whose transitions only n-step samples assemble.
  if (table.schema().has_frames()) co_return co_await sample_nstep(call, 1, beta);
  if (call.args.value("gamma")) co_return call.args.error("gamma", "needs \"nstep\"");
  // Steps of an episodic table are items too (no return, no discount), unless
  // max_times_sampled retires them per window: the table says, before anything waits.
  REPLAYD_CO_RETURN_IF_ERROR(table.check_plain_sample());
  const std::uint64_t reply_bytes = sample_reply_bytes(table, call.n);
  if (reply_bytes > call.service.limits.max_frame_bytes) {
    co_return make_error(ErrorCode::resource_exhausted,
                         "table '" + table.name() + "': a sample of n = " + std::to_string(call.n) +
                             " would be a reply of " + std::to_string(reply_bytes) +
                             " bytes, more than max_frame_bytes = " +
                             std::to_string(call.service.limits.max_frame_bytes) +
                             "; sample fewer items per request");
  }

  REPLAYD_CO_RETURN_IF_ERROR(co_await admit_when(
      call, call.table->sample_waiters, [&] { return table.may_sample(call.n); },
      "not enough items or the rate limiter does not admit this sample now"));

  REPLAYD_CO_ASSIGN_OR_RETURN(PlainSampleReply out, plain_sample_reply(table.schema(), call.n));
  const std::uint32_t size_before = table.size();
  const SamplingMass mass_before = table.sampling_mass();
  table.set_now_ms(replay_now_ms());
  REPLAYD_CO_RETURN_IF_ERROR(table.sample(call.n, beta, out.buffers()));
  table_changed(*call.table);
  co_return finish_plain_sample(*call.table, out, call.request_id, size_before, mass_before);
}

}  // namespace replayd::service::commands
