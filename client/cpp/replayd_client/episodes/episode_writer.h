// EpisodeWriter: appends steps of one or more environments' episodes to an episodic table
// (docs/TRAJECTORIES.md). Steps are copied into per-field buffers and sent `batch` at a time
// (append_steps); requests are pipelined, so there is no round trip per step or per batch.
// It opens episodes as environments need them (open_episodes, `envs` ids per round trip)
// and ends them on request (end_episode).
//
// The writer owns a Client of its own: the server knows an episode's writer by its
// connection, so only this writer may append to or end its episodes, and if the writer's
// process dies or its connection is lost, the episodes it left open end as truncated with
// their steps kept (episodes opened but never written are forgotten).
// A lost connection (a server restart, a network fault, or the server stopping: a
// shutting_down reply to one of its requests): the call that finds it (append, end_episode,
// flush, close) throws Error(connection_lost) whose message says exactly which steps and
// episode ends were not sent or refused, and which were sent but not confirmed
// (docs/TRAJECTORIES.md, "Writers and lost connections"). The writer then forgets its
// episodes, buffered steps and pending ends; nothing is sent again, and no later step goes
// into an episode of the lost connection: the next append of an env connects anew and
// starts a new episode. (If that connect fails, append throws connection_lost and keeps
// nothing; a later append tries again.)
//
// What blocks: append() and end_episode() only when they send a request while
// max_in_flight requests await their replies (they then wait for the oldest), or when an
// environment starts an episode and no opened id is left (one open_episodes round trip);
// end_episode() goes with the next batch of steps, or on its own after the appends before
// it (the server runs it after them);
// flush() and close() until every reply arrived. A pipelined request's error (Error with the
// server's code and message) is thrown by the call that collects its reply: a later append,
// end_episode, flush or close.
// Shared memory (docs/SHM.md): on a connection offered the plane (a Unix socket to a
// server of the same uid, ClientOptions::shared_memory) and a table without frame fields,
// the writer copies each step straight into a staging arena of its connection
// (max_in_flight + 1 batches) and its append_steps name the rows there instead of carrying
// them. Without the plane, with frame fields, or when the server's staging limits refuse
// the arena, the steps go through the socket. Both store the same steps.
// Frame fields (docs/PROTOCOL.md, "Frame fields"): a field with "compression": "zstd" is
// compressed here, one zstd frame per value (its level, a content checksum), in append()
// and end_episode(); the server stores the frames as sent.
// Threading: one thread uses a writer at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <future>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "replayd_client/client.h"
#include "replayd_client/columns.h"
#include "replayd_client/dtype.h"
#include "replayd_client/episodes/lost_steps.h"
#include "replayd_client/episodes/step_slots.h"
#include "replayd_client/pixels/zstd_codec.h"
#include "replayd_client/table_fields.h"

namespace replayd::client {

// One field's value of one step, borrowed for the duration of the append() call: `bytes`
// is one item of the field (prod(shape) values of `dtype`, row-major), or, with
// `compressed`, one zstd frame of it made elsewhere (fields with "compression": "zstd" only;
// its declared content size must be the item's bytes).
struct StepValue {
  std::string_view name;
  DType dtype;
  std::span<const std::byte> bytes;
  bool compressed = false;
};

// A value given as one zstd frame (a writer that compresses ahead of time, or elsewhere).
inline StepValue compressed_step_value(std::string_view name, DType dtype,
                                       std::span<const std::byte> frame) {
  return {name, dtype, frame, true};
}

// A step value from an array of values (a field with a shape).
template <typename T>
StepValue step_value(std::string_view name, std::span<const T> values) {
  return {name, dtype_of<T>, std::as_bytes(values)};
}
template <typename T>
StepValue step_value(std::string_view name, const std::vector<T>& values) {
  return step_value(name, std::span<const T>(values));
}
// A step value of a scalar field; the scalar must outlive the append() call.
template <typename T>
requires std::is_arithmetic_v<T> || std::is_same_v<T, Float16Bits> StepValue
step_value(std::string_view name, const T& scalar) {
  return step_value(name, std::span<const T>(&scalar, 1));
}

struct EpisodeWriterOptions {
  std::size_t envs = 1;           // environments written in parallel (env = 0 .. envs-1), >= 1
  std::size_t batch = 64;         // steps per append_steps request, >= 1
  std::size_t max_in_flight = 8;  // requests awaiting replies before a send blocks, >= 1
  // Longest each append waits on the server for the rate limiter, in ms; nullopt waits.
  std::optional<std::uint64_t> timeout_ms;
  // Keep the keys of the written steps (keys()); off by default, as they grow without bound.
  bool keep_keys = false;
  // Longest a step waits in a partial batch: an append (of any env) that finds the batch's
  // first step older than this sends the batch, so a slow environment's steps are sampleable
  // within about this long (no timer: a writer that stops appending keeps its partial batch
  // until end_episode, flush or close). nullopt: only full batches are sent.
  std::optional<std::chrono::milliseconds> max_delay = std::chrono::milliseconds(50);
  ClientOptions client;  // of the writer's own connection
};

class EpisodeWriter {
 public:
  // Connects to `address` and reads the table's fields (one info round trip). Throws Error:
  // as Client's constructor; not_found (no such table); invalid_argument (a table that is
  // not episodic, envs, batch or max_in_flight 0, a negative max_delay).
  EpisodeWriter(std::string_view address, std::string table, EpisodeWriterOptions options = {});
  // close(), its errors swallowed (call close() to see them).
  ~EpisodeWriter();
  EpisodeWriter(const EpisodeWriter&) = delete;
  EpisodeWriter& operator=(const EpisodeWriter&) = delete;

  // Buffers one step of env's current episode (a new episode starts at the first step after
  // end_episode): one value for every field of the table, in any order. The values are
  // copied; sends a batch once `batch` steps are buffered, or once the batch's first step is
  // `max_delay` old. Throws Error(invalid_argument) naming the env or the field (missing,
  // unknown, given twice, dtype or size mismatch), buffering nothing. O(fields + bytes of the
  // step).
  void append(std::size_t env, std::span<const StepValue> step);
  void append(std::size_t env, std::initializer_list<StepValue> step) {
    append(env, std::span<const StepValue>(step.begin(), step.size()));
  }

  // Ends env's episode: `terminated` (nothing bootstrapped past its last step) or
  // truncated (a time limit). Pipelined: with steps buffered, the end goes in their
  // append_steps request ("end", right after them), else as its own end_episode request.
  // Throws Error(invalid_argument) when env has no step in its current episode.
  // `final_observation` (tables with next_of fields): the value of each next_of field after
  // the last step (the next_obs of the last step), copied; empty: the last step stands in
  // (it is then no transition of its own). Throws Error(invalid_argument) naming the field
  // when the values are not exactly one per next_of field, ending nothing.
  void end_episode(std::size_t env, bool terminated = true,
                   std::span<const StepValue> final_observation = {});
  void end_episode(std::size_t env, bool terminated,
                   std::initializer_list<StepValue> final_observation) {
    end_episode(env, terminated,
                std::span<const StepValue>(final_observation.begin(), final_observation.size()));
  }

  // Sends the buffered steps and waits for every reply. Throws the first error among them.
  void flush();

  // Flushes, ends every episode that has steps as truncated, waits for the replies and
  // closes the connection. Idempotent; later appends throw Error(connection_lost). After a
  // lost connection, throws its report (see above) if no earlier call did.
  void close();

  // The id of env's current episode; nullopt before its first step.
  std::optional<std::uint64_t> episode(std::size_t env) const;
  // With keep_keys: the keys of the steps whose replies arrived, in append order.
  const std::vector<std::uint64_t>& keys() const { return keys_; }
  // Steps buffered but not sent yet.
  std::size_t buffered() const { return rows_; }
  // Whether the steps go through a staging arena (see "Shared memory" above) on the
  // current connection.
  bool staged() const { return slots_ != nullptr; }
  const std::string& table() const { return table_; }
  // The table's fields as the server described them, with their frame options.
  const std::vector<FieldDescription>& fields() const { return descriptions_; }

 private:
  struct Field {
    std::string name;
    DType dtype;
    std::vector<std::uint64_t> shape;
    std::size_t item_bytes = 0;
    bool zstd = false;
    int level = 3;
    // The buffered rows: raw items, or for zstd fields one frame per row (made at append).
    std::vector<std::byte> rows;
    std::vector<std::uint32_t> frame_sizes;
    // next_of fields: the final observations of the pending ends, one row each, as rows.
    std::vector<std::byte> finals;
    std::vector<std::uint32_t> final_sizes;
  };
  // One request awaiting its reply: an append (keys) or an end_episode.
  struct Pending {
    std::uint64_t sequence = 0;
    std::future<Keys> append;
    std::future<std::uint64_t> end;
    WriterRequest carries;  // its steps and ends, for the report of a lost connection
  };

  std::size_t check_env(std::size_t env) const;
  // The value of each field (each next_of field with `finals_only`) in `values`, by field
  // index (null for fields not asked for). Throws Error(invalid_argument) naming the field.
  std::vector<const StepValue*> match_values(std::span<const StepValue> values,
                                             bool finals_only) const;
  // Appends one value of `field` to `rows` (raw), or its zstd frame to `rows` and its
  // size to `sizes` (compressing a raw value here, in the caller's thread).
  void buffer_value(const Field& field, const StepValue& value, std::vector<std::byte>& rows,
                    std::vector<std::uint32_t>& sizes);
  // Adds `count` buffered rows of `field` to `batch`, which borrows the buffers.
  static void add_column(InsertBatch& batch, const Field& field, std::span<const std::byte> rows,
                         std::span<const std::uint32_t> sizes, std::size_t count);
  // The final observations of ends_ as final_request_ (one row per end).
  const InsertBatch* final_batch();
  // The writer's connection; a new one (a new writer to the server) after a loss, with
  // its staging arena when the plane is offered.
  Client& client();
  // A staging arena on client_ for the steps, or none (see "Shared memory" above).
  void stage_on_connection();
  std::uint64_t open_episode(std::size_t env);
  // The connection was lost (`error`, connection_lost): forgets the connection, its
  // episodes, the buffered steps, the pending ends and requests, and throws
  // Error(connection_lost) saying what was not sent (those and `unsent_end`, an end whose
  // own request failed to go out) and what was not confirmed (the requests in flight).
  [[noreturn]] void lost(const Error& error, std::span<const EpisodeEnding> unsent_end = {});
  // Adds a request in flight to `report`: stored (its reply arrived: its keys are kept),
  // refused (an error reply), or not confirmed (no reply). A request whose future was
  // collected already is the one that failed with `error`.
  void account_for(Pending& pending, const Error& error, LostSteps& report);
  void send_buffered();
  void clear_buffered();  // forgets the buffered steps and ends (sent, or lost with the connection)
  void push(Pending pending);
  void collect_front();
  void collect_through(std::uint64_t sequence);

  std::string address_;
  std::unique_ptr<Client> client_;    // null after a lost connection, until the next append
  std::unique_ptr<StepSlots> slots_;  // client_'s staging arena; null: through the socket
  std::string table_;
  EpisodeWriterOptions options_;
  std::vector<FieldDescription> descriptions_;
  std::vector<Field> fields_;
  std::vector<std::size_t> next_of_;  // indexes of the next_of fields, in table order
  ZstdCompressor compressor_;
  std::size_t rows_ = 0;                                // steps buffered in fields_[*].rows
  std::chrono::steady_clock::time_point first_row_at_;  // when the first of them was buffered
  std::vector<std::uint64_t> row_episodes_;             // episode of each buffered step
  std::vector<EpisodeEnding> ends_;                     // sent with the buffered steps
  bool ends_have_finals_ = false;  // ends_ carry final observations (all of them or none)
  InsertBatch final_request_;      // final observations of one request
  InsertBatch request_;            // reused for every append_steps
  std::vector<std::optional<std::uint64_t>> episodes_;  // per env
  std::vector<std::uint64_t> spare_ids_;                // opened, not yet used
  std::deque<Pending> pending_;
  std::uint64_t next_sequence_ = 1;  // of the next request sent
  std::vector<std::uint64_t> keys_;
  bool closed_ = false;
};

}  // namespace replayd::client
