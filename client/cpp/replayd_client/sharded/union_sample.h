// How a sample of a sharded table is drawn: the draws are split among the shards with a
// multinomial over their sampling masses, and the shards' samples are combined into one
// batch whose probabilities and importance weights are those of one table holding every
// item (docs/DEPLOY.md says when that is exact). Pure functions; no sockets.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "replayd_client/episodes/episode_results.h"
#include "replayd_client/results.h"

namespace replayd::client {

// Each shard's share of the draws, summing to 1: in proportion to its mass; when no
// stored item has mass (all priorities 0) in proportion to the sizes, as one table falls
// back to uniform; when nothing is known to be stored, evenly (each shard's rate limiter
// then decides). O(shards).
std::vector<double> draw_shares(std::span<const TableState> shards);

// A multinomial draw of n over `shares`: how many draws each shard serves. O(shards).
std::vector<std::uint64_t> split_draws(std::uint64_t n, std::span<const double> shares,
                                       std::mt19937_64& random);

// One shard's part of a union sample.
struct ShardSample {
  std::size_t shard = 0;
  SampleBatch sample;
};
struct ShardSequences {
  std::size_t shard = 0;
  SequenceBatch sequences;
};

// Concatenates the parts (in the given order) into one batch: global keys (shard index in
// the top bits), probabilities P = share * p_shard and weights (P / min P)^-beta where min P
// is the smallest probability any stored item had over the union, computed from each
// shard's state as the draw saw it (the part's own state, else `known`). Copies every
// column once. Throws Error(invalid_argument) when the shards' tables have different
// columns; Error(bad_reply) for a shard key >= 2^56.
SampleBatch combine_shard_samples(std::span<const ShardSample> parts,
                                  std::span<const double> shares, std::span<const TableState> known,
                                  double beta);
// The same for sequence samples (every per-step column copied as is); the batch keeps the
// first part's length and burn_in, which every part shares.
SequenceBatch combine_shard_sequences(std::span<const ShardSequences> parts,
                                      std::span<const double> shares,
                                      std::span<const TableState> known, double beta);

}  // namespace replayd::client
