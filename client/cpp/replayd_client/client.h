// Client: the replayd C++ client API over one connection (docs/PROTOCOL.md). Every
// operation has a blocking form and an _async form returning std::future; both pipeline:
// the request is written before the call returns and the reply is matched by request id,
// so one thread can keep many requests in flight.
// Threading: every method may be called from several threads at once. Futures complete
// on the connection's reader thread. Destroy a Client only when no other thread uses it;
// calls still in flight then fail with Error(connection_lost).
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replayd_client/address.h"
#include "replayd_client/columns.h"
#include "replayd_client/episodes/episode_results.h"
#include "replayd_client/error.h"
#include "replayd_client/results.h"
#include "replayd_client/shm/table_mapping.h"
#include "replayd_client/wire/connection.h"

namespace replayd::client {

struct ClientOptions {
  // Requests outstanding on the connection before a new call blocks (1..65536). Keep it
  // above the server's max_waiting_per_connection (default 1024) when many requests wait.
  std::size_t max_in_flight = 4096;
  // Sent in hello; shows up in server logs.
  std::string client_name = "replayd-cpp";
  // The server's shared token (docs/SECURITY.md), sent in hello; needed on TCP when the
  // server has one. nullopt: the REPLAYD_TOKEN environment variable, if set and non-empty.
  std::optional<std::string> token;
  // Ask for the shared-memory data plane (docs/SHM.md) in hello; Unix sockets only.
  bool shared_memory = true;
};

// An insert whose columns a writer laid out in a staging arena (docs/SHM.md): `batch`
// describes the columns (its data spans must lie in the arena, laid out as a payload of
// `rows` rows starting at `offset`: StagingArena::bytes()).
struct StagedInsert {
  const StagingArena* arena = nullptr;
  std::uint64_t offset = 0;  // multiple of 8
  std::uint64_t rows = 0;    // >= batch.size(); 0: batch.size()
};

struct InsertOptions {
  // Longest the insert waits for the rate limiter, in ms; nullopt waits until admitted;
  // 0 fails at once with timeout if not admitted now.
  std::optional<std::uint64_t> timeout_ms;
  // The policy version every item of the batch was acted with (docs/VERSIONS.md); nullopt:
  // version 0.
  std::optional<std::uint64_t> version = std::nullopt;
};

struct SampleOptions {
  double beta = 0.4;  // importance-sampling exponent (prioritized tables), finite, >= 0
  // Longest the sample waits for data or the rate limiter, in ms; nullopt waits.
  std::optional<std::uint64_t> timeout_ms;
  // Policy versions (docs/VERSIONS.md): each draw's version (SampleBatch::versions());
  // draws only of items of version >= min_version, or of version >= the current version of
  // `value` (empty: the value the table follows) less max_staleness. Not both.
  bool versions = false;
  std::optional<std::uint64_t> min_version = std::nullopt;
  std::optional<std::uint64_t> max_staleness = std::nullopt;
  std::string value = {};
};

// The version bound of one table's share of a mixed batch (docs/VERSIONS.md): none (both
// empty), items of version >= min_version, or of version >= the current version of `value`
// (empty: the value the table follows) less max_staleness. Not both.
struct VersionBoundOption {
  std::optional<std::uint64_t> min_version = std::nullopt;
  std::optional<std::uint64_t> max_staleness = std::nullopt;
  std::string value = {};
};

// An episode that an append_steps request ends right after its steps.
struct EpisodeEnding {
  std::uint64_t episode = 0;
  bool terminated = true;  // false: truncated (a time limit)
};

// Options of sample_nstep (docs/PROTOCOL.md, "n-step samples").
struct NStepOptions {
  std::uint64_t nstep = 1;  // k: steps summed into the return, 1 <= k <= capacity
  double gamma = 1.0;       // discount per step, in [0, 1]
  double beta = 0.4;        // importance-sampling exponent, finite, >= 0
  // Longest the sample waits for a valid start or the rate limiter, in ms; nullopt waits.
  std::optional<std::uint64_t> timeout_ms;
  // Frame fields: the server decompresses zstd values and sends them raw (the request's
  // "raw"); false: the client decompresses them (docs/PROTOCOL.md, "Frame fields").
  bool raw = false;
};

// Options of sample_sequences (docs/PROTOCOL.md, "sample_sequences").
struct SequenceOptions {
  std::uint64_t stride = 1;   // starts are positions that are multiples of it (>= 1)
  std::uint64_t burn_in = 0;  // steps before the start, masked where the episode has none
  bool pad = false;           // an ended episode may end a sequence early (rest masked)
  double beta = 0.4;          // importance-sampling exponent, finite, >= 0
  // Longest the sample waits for a valid start or the rate limiter, in ms; nullopt waits.
  std::optional<std::uint64_t> timeout_ms;
  bool raw = false;  // as NStepOptions::raw
};

class Client {
 public:
  // Connects to `address` ("unix:///path" or "tcp://host:port"), sends hello and checks
  // the protocol version. Throws Error: invalid_argument (bad address), connection_lost
  // (cannot connect), unauthenticated (token missing or wrong), bad_reply (another
  // protocol version).
  explicit Client(std::string_view address = kDefaultAddress, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // What the server said to the first hello.
  const ServerHello& server_hello() const { return hello_; }
  const Address& address() const { return connection_->address(); }
  // Requests sent whose replies have not arrived yet.
  std::size_t in_flight() const { return connection_->in_flight(); }
  // Shuts the connection; calls in flight fail with Error(connection_lost), later calls
  // throw it. Thread-safe, idempotent.
  void close() { connection_->close(); }
  bool is_open() const { return connection_->is_open(); }

  // Every blocking call below is its _async form followed by get(): it throws Error with
  // the server's code and message (or connection_lost) and leaves nothing changed on the
  // server when the server rejected the request.

  ServerHello hello() { return hello_async().get(); }
  std::future<ServerHello> hello_async();
  void ping() { ping_async().get(); }
  std::future<void> ping_async();
  // {"server": {...}, "tables": [INFO, ...]}, all tables or only `table`.
  boost::json::object info(std::optional<std::string_view> table = std::nullopt) {
    return info_async(table).get();
  }
  std::future<boost::json::object> info_async(std::optional<std::string_view> table = std::nullopt);
  // Creates a table from a description as in docs/CONFIG.md; returns its INFO.
  boost::json::object create_table(const boost::json::object& description, bool exist_ok = false) {
    return create_table_async(description, exist_ok).get();
  }
  std::future<boost::json::object> create_table_async(const boost::json::object& description,
                                                      bool exist_ok = false);
  // INFO of every table.
  boost::json::array list_tables() { return list_tables_async().get(); }
  std::future<boost::json::array> list_tables_async();
  void drop_table(std::string_view table) { drop_table_async(table).get(); }
  std::future<void> drop_table_async(std::string_view table);
  void reset_table(std::string_view table) { reset_table_async(table).get(); }
  std::future<void> reset_table_async(std::string_view table);

  // Inserts batch.size() items; returns their keys in item order. The batch's arrays are
  // sent before insert_async returns and may be reused then. May wait on the server for the
  // rate limiter (options.timeout_ms).
  Keys insert(std::string_view table, const InsertBatch& batch, InsertOptions options = {}) {
    return insert_async(table, batch, options).get();
  }
  std::future<Keys> insert_async(std::string_view table, const InsertBatch& batch,
                                 InsertOptions options = {});

  // Samples n items (with replacement). May wait on the server until the table holds
  // enough items and the rate limiter admits it (options.timeout_ms).
  SampleBatch sample(std::string_view table, std::uint64_t n, SampleOptions options = {}) {
    return sample_async(table, n, options).get();
  }
  std::future<SampleBatch> sample_async(std::string_view table, std::uint64_t n,
                                        SampleOptions options = {});

  // One batch drawn from several tables in one request (`sample_mixed`, docs/MIXED.md):
  // counts[i] >= 1 rows of tables[i], rows grouped by table in that order, each table's
  // drawn by its own selector (its probabilities and weights) and counted by its own rate
  // limiter. Waits until every table admits its share at once (options.timeout_ms covers
  // the whole wait); a failure draws nothing. The tables must hold the same fields and no
  // frame fields (Error(invalid_argument) naming the field and both tables). See also
  // sample_mixed (replayd_client/mixed/mixed_sample.h), which takes fractions.
  // options.versions adds each draw's version; `bounds` (empty, or one per table) bounds
  // each table's share by version (options' own min_version and max_staleness are not
  // used here: a mixed batch's sources differ, e.g. demonstrations of version 0).
  std::future<SampleBatch> sample_tables_async(std::span<const std::string> tables,
                                               std::span<const std::uint64_t> counts,
                                               SampleOptions options = {},
                                               std::span<const VersionBoundOption> bounds = {});

  // Sets new priorities for `keys` (same length; finite, >= 0). Keys no longer stored are
  // counted as stale. Never waits on the server. Throws Error(invalid_argument) before
  // sending when the lengths differ.
  UpdateResult update_priorities(std::string_view table, std::span<const std::uint64_t> keys,
                                 std::span<const double> priorities) {
    return update_priorities_async(table, keys, priorities).get();
  }
  std::future<UpdateResult> update_priorities_async(std::string_view table,
                                                    std::span<const std::uint64_t> keys,
                                                    std::span<const double> priorities);

  // Deletes the items with these keys. Never waits on the server.
  DeleteResult delete_keys(std::string_view table, std::span<const std::uint64_t> keys) {
    return delete_keys_async(table, keys).get();
  }
  std::future<DeleteResult> delete_keys_async(std::string_view table,
                                              std::span<const std::uint64_t> keys);

  // Episodic tables (docs/TRAJECTORIES.md). The writer of an episode is this connection:
  // only this Client may append to or end the episodes it opened, and when its connection
  // closes the episodes it left open end as truncated. EpisodeWriter (episode_writer.h)
  // wraps these four calls with batching and pipelining.

  // Samples n n-step transitions (start steps drawn with replacement among the valid
  // starts, docs/TRAJECTORIES.md): the batch holds each start step's fields, except the
  // reward field, which holds the return sum_{i<h} gamma^i r_{t+i}, and the bootstrap
  // fields, which hold step t+h-1's values; discounts() (gamma^h, or 0 when the episode
  // terminated at step t+h-1) and steps() (h). May wait like sample. Throws
  // Error(invalid_argument) before sending for a beta or gamma that is not finite.
  SampleBatch sample_nstep(std::string_view table, std::uint64_t n, NStepOptions options = {}) {
    return sample_nstep_async(table, n, options).get();
  }
  std::future<SampleBatch> sample_nstep_async(std::string_view table, std::uint64_t n,
                                              NStepOptions options = {});

  // Opens n new empty episodes; returns their ids (never reused).
  std::vector<std::uint64_t> open_episodes(std::string_view table, std::uint64_t n) {
    return open_episodes_async(table, n).get();
  }
  std::future<std::vector<std::uint64_t>> open_episodes_async(std::string_view table,
                                                              std::uint64_t n);
  // Appends batch.size() steps, step i to episode_ids[i] (open episodes of this Client);
  // rows of one episode in batch order, then ends the episodes of `ends` (the request's
  // "end": no request of their own). Returns their keys. The batch, the ids and the ends
  // are sent before the call returns and may be reused then. May wait for the rate limiter.
  // `final_columns` (tables with next_of fields; null: none): the final observations of the
  // ended episodes, one column per next_of field in table order, one row per end in order
  // (compressed fields as InsertBatch::add_compressed). Throws Error(invalid_argument)
  // before sending when there is not one id per step, or final rows without one end each;
  // an end that fails is an error whose message says the steps were stored.
  Keys append_steps(std::string_view table, const InsertBatch& batch,
                    std::span<const std::uint64_t> episode_ids, InsertOptions options = {},
                    std::span<const EpisodeEnding> ends = {},
                    const InsertBatch* final_columns = nullptr) {
    return append_steps_async(table, batch, episode_ids, options, ends, final_columns).get();
  }
  std::future<Keys> append_steps_async(std::string_view table, const InsertBatch& batch,
                                       std::span<const std::uint64_t> episode_ids,
                                       InsertOptions options = {},
                                       std::span<const EpisodeEnding> ends = {},
                                       const InsertBatch* final_columns = nullptr);
  // Ends an episode: terminated (nothing bootstrapped past its last step) or truncated (a
  // time limit: its last step's bootstrap fields are the bootstrap). The server runs it after
  // the table's earlier appends, so it may follow them at once (pipelined). Returns the
  // episode id. `final_observation` (null: none; the last step stands in): one row, one
  // column per next_of field, sent before the call returns.
  std::uint64_t end_episode(std::string_view table, std::uint64_t episode, bool terminated = true,
                            const InsertBatch* final_observation = nullptr) {
    return end_episode_async(table, episode, terminated, final_observation).get();
  }
  std::future<std::uint64_t> end_episode_async(std::string_view table, std::uint64_t episode,
                                               bool terminated = true,
                                               const InsertBatch* final_observation = nullptr);

  // Samples n sequences of burn_in + length consecutive steps of one episode each. May wait
  // until a valid start exists and the rate limiter admits it (options.timeout_ms). Throws
  // Error(invalid_argument) before sending for a beta that is not finite.
  SequenceBatch sample_sequences(std::string_view table, std::uint64_t n, std::uint64_t length,
                                 SequenceOptions options = {}) {
    return sample_sequences_async(table, n, length, options).get();
  }
  std::future<SequenceBatch> sample_sequences_async(std::string_view table, std::uint64_t n,
                                                    std::uint64_t length,
                                                    SequenceOptions options = {});

  // One page of stored steps in insertion order: at most n (and what fits in a frame) whose
  // sequence number is greater than `after` (0: from the start). Never waits.
  StepPage read_steps(std::string_view table, std::uint64_t n, std::uint64_t after = 0) {
    return read_steps_async(table, n, after).get();
  }
  std::future<StepPage> read_steps_async(std::string_view table, std::uint64_t n,
                                         std::uint64_t after = 0);
  // Reads every stored step, calling visit(page) for each non-empty page of at most
  // page_rows steps, oldest first, one round trip per page; steps stored meanwhile show up
  // in later pages. Returns the steps visited. What visit throws propagates.
  template <typename Visit>
  std::uint64_t read_all_steps(std::string_view table, Visit&& visit,
                               std::uint64_t page_rows = 4096) {
    std::uint64_t steps = 0;
    for (std::uint64_t after = 0;;) {
      const StepPage page = read_steps(table, page_rows, after);
      if (page.empty()) return steps;
      steps += page.size();
      after = page.next();
      visit(page);
    }
  }

  // The shared-memory data plane (docs/SHM.md; client/cpp/replayd_client/shm/), over a Unix
  // socket to a server of the same uid. Whether hello offered it:
  bool shm_offered() const { return hello_.shm_offered; }
  // Maps `table`'s column block read-only (one round trip). Throws Error(permission_denied)
  // without the plane, Error(invalid_argument) for a table with frame fields.
  std::unique_ptr<TableMapping> map_table(std::string_view table);
  // A keys-only sample ("rows": "keys"): keys, probabilities, weights, times sampled and
  // the region; the rows are gathered by the caller from the table's mapping
  // (PlaneSampler, or TableMapping::gather and drawn again where they changed under the
  // copy). May wait like sample.
  std::future<DrawnKeys> sample_keys_async(std::string_view table, std::uint64_t n,
                                           SampleOptions options = {});
  // A new staging arena of `bytes` on this connection. Throws Error(permission_denied)
  // without the plane, Error(resource_exhausted) over the server's staging limits.
  std::unique_ptr<StagingArena> map_staging(std::uint64_t bytes);
  // Inserts the rows `staged` names (the server copies them from the arena when the rate
  // limiter admits the insert: they must not change before the reply). Returns their keys.
  std::future<Keys> insert_staged_async(std::string_view table, const InsertBatch& batch,
                                        const StagedInsert& staged, InsertOptions options = {});
  // append_steps of the steps `staged` names: the fields' columns, then the steps' episode
  // ids (uint64), laid out in the arena as an append_steps payload of `staged.rows` rows
  // (docs/PROTOCOL.md, "Episodic tables"); `batch` describes the columns. The server copies
  // them when the rate limiter admits the request: they must not change before the reply.
  // Ends `ends` after the steps, as append_steps; final observations go with append_steps.
  std::future<Keys> append_steps_staged_async(std::string_view table, const InsertBatch& batch,
                                              const StagedInsert& staged,
                                              InsertOptions options = {},
                                              std::span<const EpisodeEnding> ends = {});

  // Any request, as metadata text and payload pieces; the reply as received. For
  // operations this API does not wrap. An error reply completes the future with Error.
  std::future<Reply> request_async(std::string_view meta,
                                   std::span<const PayloadPiece> payload = {});

 private:
  // The one descriptor the reply of `meta` (a map request) carries.
  std::pair<boost::json::object, int> call_with_descriptor(std::string_view meta);

  std::unique_ptr<Connection> connection_;
  ServerHello hello_;
  std::string client_name_;
  std::optional<std::string> token_;
  bool shared_memory_ = true;
  std::mutex map_mutex_;  // one map request at a time: descriptors arrive in order
};

}  // namespace replayd::client
