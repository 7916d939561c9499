// ShardedClient: several replayd servers (shards) used as one table. Inserts go whole
// batches round-robin; a sample's draws are split among the shards in proportion to their
// sampling mass and requested from all of them at once, and the parts are combined into
// one batch with union-wide probabilities and importance weights (union_sample.h); priority
// updates and deletes go to the shard that owns each key (shard_keys.h). What is exact and
// what is approximate: docs/DEPLOY.md, "Several shards".
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

namespace replayd::client {

class ShardMasses;

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

  // Routes each global key to its shard (requests to all shards in flight at once); sums
  // the results. Throws Error(invalid_argument), sending nothing, for a key naming no shard
  // or lengths that differ.
  UpdateResult update_priorities(std::string_view table, std::span<const std::uint64_t> keys,
                                 std::span<const double> priorities);
  DeleteResult delete_keys(std::string_view table, std::span<const std::uint64_t> keys);

 private:
  // For each shard, the positions into `keys` of the keys it owns.
  std::vector<std::vector<std::size_t>> route(std::span<const std::uint64_t> keys) const;

  std::vector<std::unique_ptr<Client>> shards_;
  std::shared_ptr<ShardMasses> masses_;  // shared with deferred sample futures
};

}  // namespace replayd::client
