// Global keys of a sharded table: the shard's index in the top kShardBits bits above the
// key the shard issued (< 2^56). Pure functions; the same layout as the Python client's
// ShardedClient, so keys pass between the two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "replayd_client/error.h"

namespace replayd::client {

inline constexpr unsigned kShardBits = 8;
inline constexpr unsigned kLocalKeyBits = 64 - kShardBits;
inline constexpr std::size_t kMaxShards = std::size_t{1} << kShardBits;
inline constexpr std::uint64_t kLocalKeyMask = (std::uint64_t{1} << kLocalKeyBits) - 1;

inline constexpr std::size_t shard_of_key(std::uint64_t global_key) {
  return static_cast<std::size_t>(global_key >> kLocalKeyBits);
}
inline constexpr std::uint64_t local_key(std::uint64_t global_key) {
  return global_key & kLocalKeyMask;
}
// Throws Error(bad_reply) when the shard issued a key too large to carry a shard index.
inline std::uint64_t global_key(std::size_t shard, std::uint64_t local) {
  if (local >> kLocalKeyBits) {
    throw Error(ErrorCode::bad_reply, "shard " + std::to_string(shard) + " issued key " +
                                          std::to_string(local) + ", not below 2^56");
  }
  return (std::uint64_t{shard} << kLocalKeyBits) | local;
}

}  // namespace replayd::client
