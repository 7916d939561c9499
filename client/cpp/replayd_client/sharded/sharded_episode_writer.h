// ShardedEpisodeWriter: appends steps of one or more environments' episodes to an episodic
// table of a ShardedClient, keeping each episode on one shard. An env's current episode is
// pinned to the shard next in the ShardedClient's round-robin (the order inserts follow)
// when it gets its first step; the env's next episode may go to another shard. Each shard
// has an EpisodeWriter of its own (its own connection), opened at the first episode pinned
// to it, so EpisodeWriter's guarantees hold per shard: a lost connection leaves that
// shard's open episodes truncated; what blocks and which call throws a pipelined error are
// as there. Threading: one thread uses a writer at a time; the ShardedClient must outlive
// it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "replayd_client/episodes/episode_writer.h"
#include "replayd_client/sharded/sharded_client.h"

namespace replayd::client {

class ShardedEpisodeWriter {
 public:
  // `options` go to each shard's EpisodeWriter (options.client: its connection's options,
  // e.g. client.client_options()). Connects to nothing yet. Throws Error(invalid_argument)
  // for envs or batch 0.
  ShardedEpisodeWriter(ShardedClient& client, std::string table, EpisodeWriterOptions options = {});
  // close(), its errors swallowed (call close() to see them).
  ~ShardedEpisodeWriter();
  ShardedEpisodeWriter(const ShardedEpisodeWriter&) = delete;
  ShardedEpisodeWriter& operator=(const ShardedEpisodeWriter&) = delete;

  // Buffers one step of env's current episode on its shard (EpisodeWriter::append); the
  // first step of an episode pins it to the next shard, opening that shard's writer if
  // needed (connect and info: throws as EpisodeWriter's constructor, e.g. invalid_argument
  // for a table that is not episodic). A step that throws leaves the env unpinned.
  void append(std::size_t env, std::span<const StepValue> step);
  void append(std::size_t env, std::initializer_list<StepValue> step) {
    append(env, std::span<const StepValue>(step.begin(), step.size()));
  }
  // Ends env's current episode on its shard (EpisodeWriter::end_episode) and unpins the
  // env. Throws Error(invalid_argument) when env has no step in its current episode.
  void end_episode(std::size_t env, bool terminated = true);
  // Sends every shard's buffered steps and waits for every reply.
  void flush();
  // Closes every shard's writer (each ends its open episodes as truncated), then throws the
  // first error among them. Idempotent.
  void close();

  // The shard holding env's current episode; nullopt before its first step.
  std::optional<std::size_t> shard_of(std::size_t env) const;
  // With options.keep_keys: the global keys of the steps whose replies arrived, shard by
  // shard, each in append order. O(keys).
  std::vector<std::uint64_t> keys() const;

 private:
  std::size_t check_env(std::size_t env) const;
  EpisodeWriter& writer(std::size_t shard);

  ShardedClient& client_;
  std::string table_;
  EpisodeWriterOptions options_;
  std::vector<std::unique_ptr<EpisodeWriter>> writers_;  // per shard, opened lazily
  std::vector<std::optional<std::size_t>> shard_of_;     // per env
};

}  // namespace replayd::client
