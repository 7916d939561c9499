// ShardedClient's operations on episodic tables (sharded_client.h): window samples drawn
// from the union of the shards, and reading every shard's steps with global ids.
#include <cstring>
#include <utility>

#include "replayd_client/sharded/shard_keys.h"
#include "replayd_client/sharded/shard_masses.h"
#include "replayd_client/sharded/sharded_client.h"
#include "replayd_client/sharded/union_sample.h"

namespace replayd::client {
namespace json = boost::json;
namespace {

// What combines parts of each kind of window sample.
SampleBatch combine_parts(std::vector<ShardSample>& parts, std::span<const double> shares,
                          std::span<const TableState> known, double beta) {
  return combine_shard_samples(parts, shares, known, beta);
}
SequenceBatch combine_parts(std::vector<ShardSequences>& parts, std::span<const double> shares,
                            std::span<const TableState> known, double beta) {
  return combine_shard_sequences(parts, shares, known, beta);
}

// The shard's window state the reply carried; a window reply must carry one, as the next
// split depends on it.
const TableState& window_state(const std::optional<TableState>& state, std::string_view table,
                               std::size_t shard) {
  if (!state) {
    throw Error(ErrorCode::bad_reply, "table '" + std::string(table) + "': shard " +
                                          std::to_string(shard) +
                                          " sent a window sample without its state");
  }
  return *state;
}

}  // namespace

template <typename Batch, typename Request>
std::future<Batch> ShardedClient::sample_windows(std::string_view table, std::string requirement,
                                                 std::uint64_t n, double beta, Request request) {
  // Each shard's window state as last reported; its table's info where none is known yet.
  const ShardMasses::States windows = masses_->windows(table, requirement);
  std::vector<std::future<json::object>> infos(shards_.size());
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    if (!windows[s]) infos[s] = shards_[s]->info_async(table);
  }
  std::vector<TableState> known;
  for (std::size_t s = 0; s < shards_.size(); ++s)
    known.push_back(windows[s] ? *windows[s] : state_from_info(infos[s].get()));

  std::vector<double> shares = draw_shares(known);
  const std::vector<std::uint64_t> counts = masses_->split(n, shares);
  std::vector<std::pair<std::size_t, std::future<Batch>>> requests;
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    if (counts[s] > 0) requests.emplace_back(s, request(*shards_[s], counts[s]));
  }
  using Part = std::conditional_t<std::is_same_v<Batch, SampleBatch>, ShardSample, ShardSequences>;
  return std::async(std::launch::deferred,
                    [masses = masses_, table = std::string(table),
                     requirement = std::move(requirement), requests = std::move(requests),
                     shares = std::move(shares), known = std::move(known), beta]() mutable {
                      std::vector<Part> parts;
                      for (auto& [shard, future] : requests)
                        parts.push_back({shard, future.get()});
                      for (const auto& [shard, batch] : parts)
                        masses->remember_window(table, requirement, shard,
                                                window_state(batch.state(), table, shard));
                      return combine_parts(parts, shares, known, beta);
                    });
}

std::future<SampleBatch> ShardedClient::sample_nstep_async(std::string_view table, std::uint64_t n,
                                                           NStepOptions options) {
  return sample_windows<SampleBatch>(table, "nstep " + std::to_string(options.nstep), n,
                                     options.beta,
                                     [table, options](Client& shard, std::uint64_t count) {
                                       return shard.sample_nstep_async(table, count, options);
                                     });
}

std::future<SequenceBatch> ShardedClient::sample_sequences_async(std::string_view table,
                                                                 std::uint64_t n,
                                                                 std::uint64_t length,
                                                                 SequenceOptions options) {
  const std::string requirement = "sequence " + std::to_string(length) + " " +
                                  std::to_string(options.stride) + " " +
                                  std::to_string(options.burn_in) + (options.pad ? " pad" : "");
  return sample_windows<SequenceBatch>(
      table, requirement, n, options.beta,
      [table, length, options](Client& shard, std::uint64_t count) {
        return shard.sample_sequences_async(table, count, length, options);
      });
}

StepPage global_step_page(std::size_t shard, const StepPage& page) {
  const ColumnSet& columns = page.columns();
  if (!columns.layout()) return StepPage(ColumnSet(), page.next());
  Buffer payload(columns.payload().size());
  std::memcpy(payload.data(), columns.payload().data(), payload.size());
  for (std::size_t c = 0; c < 2; ++c) {  // key, episode
    const ColumnSpec& spec = columns.layout()->columns[c];
    auto* ids = reinterpret_cast<std::uint64_t*>(payload.data() + spec.offset);
    for (std::size_t i = 0; i < page.size(); ++i)
      ids[i] = global_key(shard, ids[i]);
  }
  return StepPage(ColumnSet(columns.layout(), std::move(payload)), page.next());
}

}  // namespace replayd::client
