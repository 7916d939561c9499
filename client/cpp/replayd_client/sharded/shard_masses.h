// What a ShardedClient knows of its shards between calls: each shard's last reported state
// of each table (plain samples) and of each window requirement of an episodic table
// (n-step k, sequence shape: the window index the server keeps per requirement), the
// generator that splits draws, and the round-robin position of inserts and new episodes.
// Internal to the ShardedClient. Thread-safe (one mutex); shared with deferred sample
// futures, so it may outlive a call.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replayd_client/results.h"
#include "replayd_client/sharded/union_sample.h"

namespace replayd::client {

// A shard's state of a table from its info reply (the table's size, mass and min_mass).
TableState state_from_info(const boost::json::object& info);

class ShardMasses {
 public:
  // Per shard: its state as last reported, nullopt while unknown.
  using States = std::vector<std::optional<TableState>>;

  ShardMasses(std::size_t shards, std::optional<std::uint64_t> seed)
      : shards_(shards), random_(seed ? *seed : std::random_device{}()) {}

  std::size_t next_shard() {
    std::lock_guard lock(mutex_);
    return next_shard_++ % shards_;
  }
  std::vector<std::uint64_t> split(std::uint64_t n, std::span<const double> shares) {
    std::lock_guard lock(mutex_);
    return split_draws(n, shares, random_);
  }

  // Every shard's state of `table` if each is known.
  std::optional<std::vector<TableState>> known(std::string_view table) {
    std::lock_guard lock(mutex_);
    auto entry = tables_.find(table);
    if (entry == tables_.end()) return std::nullopt;
    std::vector<TableState> states;
    for (const auto& state : entry->second) {
      if (!state) return std::nullopt;
      states.push_back(*state);
    }
    return states;
  }
  void remember(std::string_view table, std::size_t shard, const TableState& state) {
    std::lock_guard lock(mutex_);
    slot(tables_, table)[shard] = state;
  }
  // Our own update or delete changed the masses: read them afresh next time. Window states
  // stay (a window index's mass cannot be read without sampling); `windows` drops them too
  // (the table was dropped or reset).
  void forget(std::string_view table, bool windows = false) {
    std::lock_guard lock(mutex_);
    if (auto entry = tables_.find(table); entry != tables_.end()) tables_.erase(entry);
    if (!windows) return;
    if (auto entry = windows_.find(table); entry != windows_.end()) windows_.erase(entry);
  }

  // The window states of `requirement` (a text naming k or the sequence shape) of `table`.
  States windows(std::string_view table, std::string_view requirement) {
    std::lock_guard lock(mutex_);
    auto entry = windows_.find(table);
    if (entry == windows_.end()) return States(shards_);
    auto found = entry->second.find(requirement);
    return found == entry->second.end() ? States(shards_) : found->second;
  }
  void remember_window(std::string_view table, std::string_view requirement, std::size_t shard,
                       const TableState& state) {
    std::lock_guard lock(mutex_);
    auto entry = windows_.find(table);
    if (entry == windows_.end()) entry = windows_.emplace(std::string(table), Slots{}).first;
    slot(entry->second, requirement)[shard] = state;
  }

 private:
  using Slots = std::map<std::string, States, std::less<>>;
  States& slot(Slots& slots, std::string_view key) {
    auto entry = slots.find(key);
    if (entry == slots.end()) entry = slots.emplace(std::string(key), States(shards_)).first;
    return entry->second;
  }

  std::mutex mutex_;
  const std::size_t shards_;
  std::mt19937_64 random_;
  std::uint64_t next_shard_ = 0;
  Slots tables_;
  std::map<std::string, Slots, std::less<>> windows_;  // table -> requirement -> states
};

}  // namespace replayd::client
