// PlaneSampler: samples of one table whose rows the learner copies out of the table's
// mapping itself (the shared-memory data plane, docs/SHM.md) instead of receiving them
// through the socket. A sample is a keys-only request (Client::sample_keys_async); the
// sampler gathers the drawn rows into a batch laid out as Client::sample's, then checks
// each row's stamp, and draws again (one keys request) for the rows that changed under the
// copy, until none did. The result is what Client::sample returns: the same columns in
// the same order, the keys and draw statistics of the items whose rows it holds.
// Pipelining: keep several sample_keys_async requests in flight and complete() each reply,
// so that no round trip is paid per batch.
// Ownership: borrows the Client (it must outlive the sampler); owns the mapping.
// Threading: one thread at a time (the Client's calls may come from others).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "replayd_client/client.h"
#include "replayd_client/shm/table_mapping.h"

namespace replayd::client {

class PlaneSampler {
 public:
  // Maps `table` (one round trip). Throws Error(permission_denied) on a connection without
  // the plane, Error(invalid_argument) for a table whose rows do not go over it (frame
  // fields, items retired when sampled), Error(not_found) for no such table.
  PlaneSampler(Client& client, std::string table);

  // n draws with their rows; waits like Client::sample.
  SampleBatch sample(std::uint64_t n, SampleOptions options = {}) {
    return complete(client_.sample_keys_async(table_, n, options).get(), options);
  }
  // The batch of a keys-only reply of this table: its rows gathered, and the rows that
  // changed under the copy drawn again with `options`. Throws Error(not_found) when the
  // draws name another block than the mapped one (the table was dropped or replaced since:
  // make a new sampler), Error(bad_reply) for draws naming slots beyond the capacity.
  // Redraws are bounded: Error(timeout) once options.timeout_ms passed with rows still
  // changing, or, without a timeout, Error(resource_exhausted) after kMaxRedrawRounds
  // rounds (the redraw budget spent), as the Python client raises.
  SampleBatch complete(DrawnKeys drawn, SampleOptions options = {});
  static constexpr std::uint64_t kMaxRedrawRounds = 64;

  // Rows that changed under the copy and were drawn again, since the table was mapped.
  std::uint64_t changed_rows() const { return changed_rows_; }
  const TableMapping& mapping() const { return *mapping_; }
  const std::string& table() const { return table_; }

 private:
  // The layout of a batch of n draws (reused while n stays the same).
  std::shared_ptr<const SampleLayout> layout_of(const SampleBatch& draws);
  void check_region(const DrawnKeys& drawn) const;

  Client& client_;
  std::string table_;
  std::unique_ptr<TableMapping> mapping_;
  std::shared_ptr<const SampleLayout> layout_;
  std::uint64_t changed_rows_ = 0;
  std::vector<std::vector<std::byte>> redrawn_rows_;  // per field, rows drawn again
};

}  // namespace replayd::client
