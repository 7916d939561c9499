#include "replayd_client/sharded/sharded_episode_writer.h"

#include <exception>
#include <utility>

#include "replayd_client/sharded/shard_keys.h"

namespace replayd::client {

ShardedEpisodeWriter::ShardedEpisodeWriter(ShardedClient& client, std::string table,
                                           EpisodeWriterOptions options)
    : client_(client),
      table_(std::move(table)),
      options_(std::move(options)),
      writers_(client.shard_count()) {
  if (options_.envs == 0) {
    throw Error(ErrorCode::invalid_argument, "ShardedEpisodeWriter: envs must be >= 1, got 0");
  }
  if (options_.batch == 0) {
    throw Error(ErrorCode::invalid_argument, "ShardedEpisodeWriter: batch must be >= 1, got 0");
  }
  shard_of_.resize(options_.envs);
}

ShardedEpisodeWriter::~ShardedEpisodeWriter() {
  try {
    close();
  } catch (...) {  // NOLINT(bugprone-empty-catch): close() documents how to see them
  }
}

std::size_t ShardedEpisodeWriter::check_env(std::size_t env) const {
  if (env >= options_.envs) {
    throw Error(ErrorCode::invalid_argument, "table '" + table_ + "': env must be in 0.." +
                                                 std::to_string(options_.envs - 1) + ", got " +
                                                 std::to_string(env));
  }
  return env;
}

EpisodeWriter& ShardedEpisodeWriter::writer(std::size_t shard) {
  if (!writers_[shard]) {
    writers_[shard] = std::make_unique<EpisodeWriter>(client_.address(shard), table_, options_);
  }
  return *writers_[shard];
}

void ShardedEpisodeWriter::append(std::size_t env, std::span<const StepValue> step) {
  check_env(env);
  const std::size_t shard = shard_of_[env] ? *shard_of_[env] : client_.next_shard();
  writer(shard).append(env, step);
  shard_of_[env] = shard;  // only once the step was accepted
}

void ShardedEpisodeWriter::end_episode(std::size_t env, bool terminated) {
  check_env(env);
  if (!shard_of_[env]) {
    throw Error(ErrorCode::invalid_argument, "table '" + table_ + "': env " + std::to_string(env) +
                                                 " has no open episode (append a step first)");
  }
  writer(*shard_of_[env]).end_episode(env, terminated);
  shard_of_[env].reset();
}

void ShardedEpisodeWriter::flush() {
  for (auto& writer : writers_) {
    if (writer) writer->flush();
  }
}

void ShardedEpisodeWriter::close() {
  std::exception_ptr first;
  for (auto& writer : writers_) {
    if (!writer) continue;
    try {
      writer->close();
    } catch (...) {  // close the others, then throw the first error
      if (!first) first = std::current_exception();
    }
  }
  for (auto& shard : shard_of_)
    shard.reset();
  if (first) std::rethrow_exception(first);
}

std::optional<std::size_t> ShardedEpisodeWriter::shard_of(std::size_t env) const {
  return shard_of_[check_env(env)];
}

std::vector<std::uint64_t> ShardedEpisodeWriter::keys() const {
  std::vector<std::uint64_t> global;
  for (std::size_t s = 0; s < writers_.size(); ++s) {
    if (!writers_[s]) continue;
    for (std::uint64_t key : writers_[s]->keys())
      global.push_back(global_key(s, key));
  }
  return global;
}

}  // namespace replayd::client
