// Mixed batches: one batch drawn from several tables, each table's share a fixed fraction
// (RLPD's half offline, half online; a demonstrations table beside online replay), as the
// Python client's sample({"online": 0.5, "demos": 0.5}, n) (docs/MIXED.md). A plain batch
// of two or more tables is one `sample_mixed` request (Client::sample_tables_async: the
// server waits until every table admits its share and draws them all at once); an n-step
// batch is one request per table with rows, all sent before any reply is awaited (one round
// trip). Each table's rows are drawn by its own selector and counted by its own rate
// limiter. The batch keeps each table's part as that table's SampleBatch, rows grouped by
// table in the order the shares were given.
// Threading: as Client (the calls may come from several threads).
#pragma once

#include <cstdint>
#include <future>
#include <span>
#include <string>
#include <vector>

#include "replayd_client/client.h"

namespace replayd::client {

// One table's share of a mixed batch: a fraction >= 0; a batch's fractions sum to 1.
struct TableShare {
  std::string table;
  double fraction = 0;
};

// The rows of each table in a batch of n: floor(fraction * n), and the rows left over one
// each to the largest remainders, ties to the table given first; the same every time.
// Throws Error(invalid_argument) naming the problem when a fraction is negative or not
// finite, a table is named twice, or the fractions do not sum to 1 within 1e-6.
std::vector<std::uint64_t> mixed_counts(std::span<const TableShare> shares, std::uint64_t n);

class MixedBatch {
 public:
  MixedBatch() = default;
  MixedBatch(std::vector<std::string> tables, std::vector<SampleBatch> parts);

  // Rows of the whole batch.
  std::size_t size() const { return offsets_.empty() ? 0 : offsets_.back(); }
  // The tables in the order the shares named them (those with 0 rows included).
  const std::vector<std::string>& tables() const { return tables_; }
  // Table t's rows (an empty batch when its share was 0 rows): their keys, probabilities and
  // importance weights come from table t's own selector, weights normalised by table t's own
  // largest weight, as a one-table sample of that table would give them.
  const SampleBatch& part(std::size_t table) const { return parts_.at(table); }
  // Table t's rows are rows offset(t) .. offset(t + 1) - 1 of the batch.
  std::size_t offset(std::size_t table) const { return offsets_.at(table); }
  // The index (into tables()) of the table row `row` came from.
  std::size_t table_of(std::size_t row) const;

 private:
  std::vector<std::string> tables_;
  std::vector<SampleBatch> parts_;
  std::vector<std::size_t> offsets_;  // tables + 1 entries
};

// Draws a mixed batch of n. sample_mixed: one sample_mixed request (the tables must hold
// the same fields, no frame fields; a failure draws nothing). sample_mixed_nstep: one
// n-step sample per table with rows, sent together; a share that fails fails the call (the
// other shares were drawn and counted by their tables' limiters).
MixedBatch sample_mixed(Client& client, std::span<const TableShare> shares, std::uint64_t n,
                        SampleOptions options = {});
MixedBatch sample_mixed_nstep(Client& client, std::span<const TableShare> shares, std::uint64_t n,
                              NStepOptions options = {});

// Sets row i's priority to priorities[i] on the table it came from: one update per table,
// sent together (one round trip). Returns each table's result, in tables() order. Throws
// Error(invalid_argument) before sending when there is not one priority per row.
std::vector<UpdateResult> update_mixed_priorities(Client& client, const MixedBatch& batch,
                                                  std::span<const double> priorities);

}  // namespace replayd::client
