// The handlers of the command table, one file each in service/commands/. Each reads like its
// section of docs/PROTOCOL.md: decode the keys the entry declares, act on the table (the
// table decides), return the reply or a Deferred that runs once admitted.
// Threading: io_context thread only; none suspends.
#pragma once

#include "service/commands/command.h"

namespace replayd::service::commands {

Result<Outcome> hello(Call& call);
Result<Outcome> ping(Call& call);
Result<Outcome> info(Call& call);
Result<Outcome> list_tables(Call& call);
Result<Outcome> create_table(Call& call);
Result<Outcome> drop_table(Call& call);
Result<Outcome> reset_table(Call& call);
Result<Outcome> insert(Call& call);
Result<Outcome> sample(Call& call);
Result<Outcome> update_priorities(Call& call);
Result<Outcome> delete_keys(Call& call);
Result<Outcome> snapshot(Call& call);
Result<Outcome> open_episodes(Call& call);
Result<Outcome> append_steps(Call& call);
Result<Outcome> end_episode(Call& call);
Result<Outcome> sample_sequences(Call& call);
Result<Outcome> read_steps(Call& call);

// `sample` with "nstep": k, validated here; beta already read. Reads "gamma".
Result<Outcome> sample_nstep(Call& call, std::uint64_t k, double beta);

// A reply with JSON metadata `meta` and no payload.
inline Outcome reply_with(const Call& call, std::string meta) {
  return make_reply(call.request_id, std::move(meta));
}

}  // namespace replayd::service::commands
