// The handlers of the command table, one file each in service/commands/. Each reads like its
// section of docs/PROTOCOL.md: decode the keys the entry declares, co_await admission when
// the operation may wait (service/waiting/admission.h), act on the table (the table
// decides), return the reply.
// Threading: io_context thread only; a handler suspends only in admission.
#pragma once

#include <string>

#include "service/commands/command.h"

namespace replayd::service::commands {

asio::awaitable<Result<Reply>> hello(Call& call);
asio::awaitable<Result<Reply>> ping(Call& call);
asio::awaitable<Result<Reply>> info(Call& call);
asio::awaitable<Result<Reply>> list_tables(Call& call);
asio::awaitable<Result<Reply>> create_table(Call& call);
asio::awaitable<Result<Reply>> drop_table(Call& call);
asio::awaitable<Result<Reply>> configure_table(Call& call);
asio::awaitable<Result<Reply>> reset_table(Call& call);
asio::awaitable<Result<Reply>> insert(Call& call);
asio::awaitable<Result<Reply>> sample(Call& call);
asio::awaitable<Result<Reply>> sample_mixed(Call& call);
asio::awaitable<Result<Reply>> update_priorities(Call& call);
asio::awaitable<Result<Reply>> delete_keys(Call& call);
asio::awaitable<Result<Reply>> snapshot(Call& call);
asio::awaitable<Result<Reply>> open_episodes(Call& call);
asio::awaitable<Result<Reply>> append_steps(Call& call);
asio::awaitable<Result<Reply>> end_episode(Call& call);
asio::awaitable<Result<Reply>> sample_sequences(Call& call);
asio::awaitable<Result<Reply>> read_steps(Call& call);
// Published values (service/values/, docs/VALUES.md).
asio::awaitable<Result<Reply>> publish_begin(Call& call);
asio::awaitable<Result<Reply>> publish_part(Call& call);
asio::awaitable<Result<Reply>> publish_commit(Call& call);
asio::awaitable<Result<Reply>> fetch(Call& call);
// The shared-memory data plane (service/commands/shm/, docs/SHM.md).
asio::awaitable<Result<Reply>> map_table(Call& call);
asio::awaitable<Result<Reply>> map_staging(Call& call);
asio::awaitable<Result<Reply>> unmap_staging(Call& call);

// `sample` with "nstep": k, validated here; beta already read. Reads "gamma".
asio::awaitable<Result<Reply>> sample_nstep(Call& call, std::uint64_t k, double beta);

// Whether a plain sample of `table` may leave its rows to this connection's mapping (a
// keys-only reply, docs/SHM.md): the plane is offered to it, the table lives in shared
// memory, has no frame fields, and its items do not retire when sampled. (sample.cpp)
bool rows_in_shared_memory(const Call& call, const Table& table);
// `,"region":<id>`: the block a keys-only reply's rows are read from. (sample.cpp)
std::string region_meta(const Table& table);

// A reply with JSON metadata `meta` and no payload.
inline Reply reply_with(const Call& call, std::string meta) {
  return make_reply(call.request_id, std::move(meta));
}

}  // namespace replayd::service::commands
