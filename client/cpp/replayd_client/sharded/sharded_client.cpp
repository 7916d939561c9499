#include "replayd_client/sharded/sharded_client.h"

#include "replayd_client/sharded/shard_keys.h"
#include "replayd_client/sharded/shard_masses.h"
#include "replayd_client/sharded/union_sample.h"

namespace replayd::client {
namespace json = boost::json;

TableState state_from_info(const json::object& info) {
  const json::object& table = info.at("tables").as_array().at(0).as_object();
  return {table.at("size").to_number<std::uint64_t>(), table.at("mass").to_number<double>(),
          table.at("min_mass").to_number<double>()};
}

ShardedClient::ShardedClient(std::span<const std::string> addresses, ClientOptions options,
                             std::optional<std::uint64_t> seed)
    : addresses_(addresses.begin(), addresses.end()), options_(options) {
  if (addresses.empty() || addresses.size() > kMaxShards) {
    throw Error(ErrorCode::invalid_argument, "a ShardedClient needs 1 to " +
                                                 std::to_string(kMaxShards) + " addresses, got " +
                                                 std::to_string(addresses.size()));
  }
  for (const auto& address : addresses)
    shards_.push_back(std::make_unique<Client>(address, options));
  masses_ = std::make_shared<ShardMasses>(shards_.size(), seed);
}

ShardedClient::~ShardedClient() = default;

std::size_t ShardedClient::next_shard() {
  return masses_->next_shard();
}

void ShardedClient::close() {
  for (auto& shard : shards_)
    shard->close();
}

std::vector<json::object> ShardedClient::create_table(const json::object& description,
                                                      bool exist_ok) {
  std::vector<std::future<json::object>> created;
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    json::object shard_description = description;
    if (const json::value* capacity = description.if_contains("capacity");
        capacity && capacity->is_number()) {
      const auto total = capacity->to_number<std::uint64_t>();
      shard_description["capacity"] =
          std::max<std::uint64_t>(1, (total + shards_.size() - 1) / shards_.size());
    }
    if (const json::value* seed = description.if_contains("seed"); seed && seed->is_number()) {
      shard_description["seed"] = seed->to_number<std::uint64_t>() + s;
    }
    created.push_back(shards_[s]->create_table_async(shard_description, exist_ok));
  }
  std::vector<json::object> infos;
  for (auto& future : created)
    infos.push_back(future.get());
  return infos;
}

void ShardedClient::drop_table(std::string_view table) {
  for (auto& shard : shards_)
    shard->drop_table(table);
  masses_->forget(table, /*windows=*/true);
}

void ShardedClient::reset_table(std::string_view table) {
  for (auto& shard : shards_)
    shard->reset_table(table);
  masses_->forget(table, /*windows=*/true);
}

std::uint64_t ShardedClient::size(std::string_view table) {
  std::vector<std::future<json::object>> infos;
  for (auto& shard : shards_)
    infos.push_back(shard->info_async(table));
  std::uint64_t items = 0;
  for (auto& info : infos)
    items += state_from_info(info.get()).size;
  return items;
}

std::future<Keys> ShardedClient::insert_async(std::string_view table, const InsertBatch& batch,
                                              InsertOptions options) {
  const std::size_t shard = next_shard();
  return std::async(std::launch::deferred,
                    [shard, local = shards_[shard]->insert_async(table, batch, options)]() mutable {
                      const Keys keys = local.get();
                      Buffer global(keys.size() * sizeof(std::uint64_t));
                      auto* out = reinterpret_cast<std::uint64_t*>(global.data());
                      for (std::size_t i = 0; i < keys.size(); ++i)
                        out[i] = global_key(shard, keys[i]);
                      return Keys(std::move(global), keys.size());
                    });
}

std::future<SampleBatch> ShardedClient::sample_async(std::string_view table, std::uint64_t n,
                                                     SampleOptions options) {
  auto known = masses_->known(table);
  if (!known) {
    std::vector<std::future<json::object>> infos;
    for (auto& shard : shards_)
      infos.push_back(shard->info_async(table));
    known.emplace();
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      known->push_back(state_from_info(infos[s].get()));
      masses_->remember(table, s, known->back());
    }
  }
  std::vector<double> shares = draw_shares(*known);
  const std::vector<std::uint64_t> counts = masses_->split(n, shares);
  std::vector<std::pair<std::size_t, std::future<SampleBatch>>> requests;
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    if (counts[s] > 0)
      requests.emplace_back(s, shards_[s]->sample_async(table, counts[s], options));
  }
  return std::async(
      std::launch::deferred,
      [masses = masses_, table = std::string(table), requests = std::move(requests),
       shares = std::move(shares), known = std::move(*known), beta = options.beta]() mutable {
        std::vector<ShardSample> parts;
        for (auto& [shard, future] : requests)
          parts.push_back({shard, future.get()});
        for (const auto& part : parts) {
          if (part.sample.state()) masses->remember(table, part.shard, *part.sample.state());
        }
        return combine_shard_samples(parts, shares, known, beta);
      });
}

std::vector<std::vector<std::size_t>> ShardedClient::route(
    std::span<const std::uint64_t> keys) const {
  std::vector<std::vector<std::size_t>> positions(shards_.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::size_t shard = shard_of_key(keys[i]);
    if (shard >= shards_.size()) {
      throw Error(ErrorCode::invalid_argument, "key " + std::to_string(keys[i]) + " names shard " +
                                                   std::to_string(shard) + ", but there are " +
                                                   std::to_string(shards_.size()) + " shards");
    }
    positions[shard].push_back(i);
  }
  return positions;
}

UpdateResult ShardedClient::update_priorities(std::string_view table,
                                              std::span<const std::uint64_t> keys,
                                              std::span<const double> priorities) {
  if (keys.size() != priorities.size()) {
    throw Error(ErrorCode::invalid_argument, "update_priorities: " + std::to_string(keys.size()) +
                                                 " keys but " + std::to_string(priorities.size()) +
                                                 " priorities");
  }
  const auto positions = route(keys);
  std::vector<std::future<UpdateResult>> updates;
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    if (positions[s].empty()) continue;
    std::vector<std::uint64_t> local;
    std::vector<double> values;
    for (std::size_t i : positions[s]) {
      local.push_back(local_key(keys[i]));
      values.push_back(priorities[i]);
    }
    updates.push_back(shards_[s]->update_priorities_async(table, local, values));  // sent now
  }
  masses_->forget(table);
  UpdateResult total;
  for (auto& update : updates) {
    const UpdateResult result = update.get();
    total.applied += result.applied;
    total.stale += result.stale;
  }
  return total;
}

DeleteResult ShardedClient::delete_keys(std::string_view table,
                                        std::span<const std::uint64_t> keys) {
  const auto positions = route(keys);
  std::vector<std::future<DeleteResult>> deletes;
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    if (positions[s].empty()) continue;
    std::vector<std::uint64_t> local;
    for (std::size_t i : positions[s])
      local.push_back(local_key(keys[i]));
    deletes.push_back(shards_[s]->delete_keys_async(table, local));
  }
  masses_->forget(table);
  DeleteResult total;
  for (auto& result : deletes) {
    const DeleteResult one = result.get();
    total.deleted += one.deleted;
    total.stale += one.stale;
  }
  return total;
}

}  // namespace replayd::client
