// ShardedClient: several replayd servers (shards) used as one table. Inserts go whole
// batches round-robin; a sample's draws are split among the shards in proportion to their
// sampling mass and requested from all of them at once, and the parts are combined into
// one batch with union-wide probabilities and importance weights (union_sample.h); priority
// updates and deletes go to the shard that owns each key (shard_keys.h). What is exact and
// what is approximate: docs/DEPLOY.md, "Several shards". Episodic tables: each episode
// stays on one shard (ShardedEpisodeWriter, sharded_episode_writer.h), and n-step and
// sequence samples draw windows from the union the same way, split by the masses of the
// shards' window indexes (sample_nstep, sample_sequences).
// Threading: every method may be called from several threads at once. The futures of the
// _async calls are deferred: the requests are sent before the call returns, and get()
// gathers the replies in the caller's thread (wait_for answers future_status::deferred).
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replayd_client/client.h"
#include "replayd_client/episodes/episode_results.h"

namespace replayd::client {

class ShardMasses;

// `page` of `shard` with its keys and episode ids global. Throws Error(bad_reply) for an id
// >= 2^56. O(page bytes).
StepPage global_step_page(std::size_t shard, const StepPage& page);

class ShardedClient {
 public:
  // Connects to every address (1 to kMaxShards), each as a Client with `options`. `seed`
  // fixes how draws are split among shards (random otherwise). Throws like Client, or
  // Error(invalid_argument) for a bad number of addresses.
  explicit ShardedClient(std::span<const std::string> addresses, ClientOptions options = {},
                         std::optional<std::uint64_t> seed = std::nullopt);
  ~ShardedClient();
  ShardedClient(const ShardedClient&) = delete;
  ShardedClient& operator=(const ShardedClient&) = delete;

  std::size_t shard_count() const { return shards_.size(); }
  // The shard's own client, for per-shard calls (info, ping...). Its keys are local keys.
  Client& shard(std::size_t index) { return *shards_.at(index); }
  // The address of shard `index`, and the options every shard's Client was made with.
  const std::string& address(std::size_t index) const { return addresses_.at(index); }
  const ClientOptions& client_options() const { return options_; }
  // The next shard of the round-robin that inserts and new episodes follow.
  std::size_t next_shard();
  // Closes every shard's connection; calls in flight fail with connection_lost.
  void close();

  // Creates the table on every shard, each with capacity ceil(capacity / shards) and, when
  // the description has a seed, seed + shard index. Returns each shard's INFO.
  std::vector<boost::json::object> create_table(const boost::json::object& description,
                                                bool exist_ok = false);
  void drop_table(std::string_view table);
  void reset_table(std::string_view table);
  // Items stored over all shards.
  std::uint64_t size(std::string_view table);

  // Inserts the whole batch into the next shard (round-robin); returns global keys.
  Keys insert(std::string_view table, const InsertBatch& batch, InsertOptions options = {}) {
    return insert_async(table, batch, options).get();
  }
  std::future<Keys> insert_async(std::string_view table, const InsertBatch& batch,
                                 InsertOptions options = {});

  // Draws n items from the union: a multinomial split over the shards' masses (as their
  // last replies reported them; from info the first time), one request per shard that got
  // draws, all sent before sample_async returns. The batch holds the parts in shard order,
  // with global keys, union probabilities and weights; state() is nullopt. May wait on the
  // shards like Client::sample.
  SampleBatch sample(std::string_view table, std::uint64_t n, SampleOptions options = {}) {
    return sample_async(table, n, options).get();
  }
  std::future<SampleBatch> sample_async(std::string_view table, std::uint64_t n,
                                        SampleOptions options = {});

  // Episodic tables. n-step and sequence samples draw n windows from the union: the draws
  // are split by a multinomial over each shard's mass of valid starts for this window
  // requirement (k; length, stride, burn_in, pad) as its last reply of that requirement
  // reported it, or, before a shard has answered one, its table's mass (info, read afresh:
  // approximate, as starts are at most the steps). Requests go to all shards drawn at once;
  // the batch holds the parts in shard order with global keys, probabilities
  // P = share * p_shard and weights (P / min P)^-beta over the union, exact for the split
  // that happened; state() is nullopt. Windows never span shards (an episode lives on one).
  // Throw like Client's calls; Error(bad_reply) for a shard reply without its state.
  SampleBatch sample_nstep(std::string_view table, std::uint64_t n, NStepOptions options = {}) {
    return sample_nstep_async(table, n, options).get();
  }
  std::future<SampleBatch> sample_nstep_async(std::string_view table, std::uint64_t n,
                                              NStepOptions options = {});
  SequenceBatch sample_sequences(std::string_view table, std::uint64_t n, std::uint64_t length,
                                 SequenceOptions options = {}) {
    return sample_sequences_async(table, n, length, options).get();
  }
  std::future<SequenceBatch> sample_sequences_async(std::string_view table, std::uint64_t n,
                                                    std::uint64_t length,
                                                    SequenceOptions options = {});

  // Every stored step of every shard, shard after shard, as Client::read_all_steps reads
  // one: visit(page) per non-empty page, its keys and episode ids global (the shard in the
  // top bits; page.next() stays the shard's own cursor). Returns the steps visited. Each
  // page is copied once to rewrite its ids.
  template <typename Visit>
  std::uint64_t read_all_steps(std::string_view table, Visit&& visit,
                               std::uint64_t page_rows = 4096) {
    std::uint64_t steps = 0;
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      steps += shards_[s]->read_all_steps(
          table, [&](const StepPage& page) { visit(global_step_page(s, page)); }, page_rows);
    }
    return steps;
  }

  // Routes each global key to its shard (requests to all shards in flight at once); sums
  // the results. Throws Error(invalid_argument), sending nothing, for a key naming no shard
  // or lengths that differ.
  UpdateResult update_priorities(std::string_view table, std::span<const std::uint64_t> keys,
                                 std::span<const double> priorities);
  DeleteResult delete_keys(std::string_view table, std::span<const std::uint64_t> keys);

 private:
  // For each shard, the positions into `keys` of the keys it owns.
  std::vector<std::vector<std::size_t>> route(std::span<const std::uint64_t> keys) const;

  // One union draw of n windows of `requirement` (a text naming it); `request(shard, count)`
  // sends one shard's part. Defined in sharded_episodes.cpp.
  template <typename Batch, typename Request>
  std::future<Batch> sample_windows(std::string_view table, std::string requirement,
                                    std::uint64_t n, double beta, Request request);

  std::vector<std::string> addresses_;
  ClientOptions options_;
  std::vector<std::unique_ptr<Client>> shards_;
  std::shared_ptr<ShardMasses> masses_;  // shared with deferred sample futures
};

}  // namespace replayd::client
