#include "service/protocol/table_json.h"

#include "service/shm/shared_columns.h"
#include "service/table_description.h"

namespace replayd::service::commands {
namespace json = boost::json;

namespace {

// The replay distributions' headline figures (docs/OPERATIONS.md has the full histograms):
// quantiles estimated from the power-of-two buckets as Prometheus' histogram_quantile does.
template <typename Histogram>
json::object quantiles_json(const Histogram& h, double scale = 1.0) {
  return json::object{
      {"count", h.count},
      {"p50", h.quantile(0.5) * scale},
      {"p99", h.quantile(0.99) * scale},
      {"mean",
       h.count == 0 ? 0.0 : static_cast<double>(h.sum) * scale / static_cast<double>(h.count)}};
}

json::object replay_json(const TableInfo& info) {
  const ReplayHistograms& r = info.replay;
  const auto& limiter = info.rate_limiter;
  return json::object{
      {"sample_age_inserts", quantiles_json(r.sample_age_inserts)},
      {"sample_age_s", quantiles_json(r.sample_age_ms, 1e-3)},
      {"sample_staleness_versions", quantiles_json(r.sample_staleness_versions)},
      {"times_sampled_at_removal", quantiles_json(r.times_sampled_at_removal)},
      {"update_age_inserts", quantiles_json(r.update_age_inserts)},
      {"samples_per_insert", limiter.inserts == 0 ? 0.0
                                                  : static_cast<double>(limiter.samples) /
                                                        static_cast<double>(limiter.inserts)},
  };
}

// The policy versions of the stored items (docs/VERSIONS.md): the followed value's version
// (null until known), the oldest and newest stored versions (null when empty), how many
// distinct ones, and the items dropped behind a version.
json::object versions_json(const Table& table) {
  const VersionIndex& index = table.versions();
  const auto or_null = [](std::optional<std::uint64_t> v) {
    return v ? json::value(*v) : json::value(nullptr);
  };
  return json::object{{"policy_version", or_null(table.policy_version())},
                      {"oldest", or_null(index.min_version())},
                      {"newest", or_null(index.max_version())},
                      {"distinct", index.distinct_versions()},
                      {"dropped", table.info().counters.version_drops}};
}

}  // namespace

namespace {

// A table's file tier (docs/FILE_TIER.md): its rows in RAM and on disk, its files, what it
// wrote and read.
json::object file_tier_json(const Table& table, const FileTier& tier) {
  const TierIndex& index = *table.tier();
  const FileTierStats& stats = tier.stats();
  return json::object{{"ram_bytes", table.config().file_tier.ram_bytes},
                      {"ram_rows", index.ram_rows()},
                      {"hot_rows", index.hot_rows()},
                      {"cold_rows", index.cold_rows()},
                      {"file_bytes", tier.file_bytes()},
                      {"segments", tier.segments()},
                      {"rows_written", stats.rows_written},
                      {"bytes_written", stats.bytes_written},
                      {"cold_reads", stats.cold_reads},
                      {"read_batches", stats.read_batches},
                      {"read_seconds", stats.read_seconds},
                      {"write_errors", stats.write_errors},
                      {"segments_deleted", stats.segments_deleted},
                      {"rows_moved", stats.rows_moved},
                      {"bytes_moved", stats.bytes_moved}};
}

}  // namespace

json::object table_info_json(const HostedTable& hosted) {
  const Table& table = *hosted.table;
  const TableInfo info = table.info();
  const auto& c = info.counters;
  const SamplingMass mass = table.sampling_mass();
  json::object reply{
      {"name", table.name()},
      {"size", info.size},
      {"capacity", info.capacity},
      {"description", describe_table(table.config())},
      {"counters", json::object{{"inserts", c.inserts},
                                {"samples", c.samples},
                                {"priority_updates", c.priority_updates},
                                {"stale_updates", c.stale_updates},
                                {"deletes", c.deletes},
                                {"stale_deletes", c.stale_deletes},
                                {"evictions", c.evictions},
                                {"expirations", c.expirations},
                                {"resets", info.replay.resets},
                                {"reset_items", info.replay.reset_items}}},
      {"rate_limiter", json::object{{"inserts", info.rate_limiter.inserts},
                                    {"samples", info.rate_limiter.samples},
                                    {"deletes", info.rate_limiter.deletes}}},
      {"waiting", json::object{{"inserts", hosted.insert_waiters.size()},
                               {"samples", hosted.sample_waiters.size()}}},
      {"mass", mass.total},
      {"min_mass", mass.min_positive},
      {"bytes", table.allocated_bytes()},
      {"compressed_bytes", table.storage().blob_bytes()},
  };
  if (!table.config().episodes.pad_history) reply["history_steps"] = info.history_steps;
  // Whether same-host clients may map the table (docs/SHM.md), and why not when the server
  // offers the plane but the system refused this table shared memory.
  const ColumnMemory& memory = table.storage().memory();
  reply["shared_memory"] = shm::shared_columns_of(memory) != nullptr;
  if (const std::string* refusal = shm::plane_refusal_of(memory))
    reply["shared_memory_refused"] = *refusal;
  reply["replay"] = replay_json(info);
  reply["versions"] = versions_json(table);
  if (hosted.tier) reply["file_tier"] = file_tier_json(table, *hosted.tier);
  return reply;
}

json::array all_table_infos(const ServiceContext& context) {
  json::array tables;
  for (const auto& hosted : context.tables.list())
    tables.push_back(table_info_json(*hosted));
  return tables;
}

json::object limits_json(const Limits& limits) {
  return json::object{
      {"max_frame_bytes", limits.max_frame_bytes},
      {"max_meta_bytes", limits.max_meta_bytes},
      {"max_batch_items", limits.max_batch_items},
      {"max_waiting_per_connection", limits.max_waiting_per_connection},
      {"max_nstep", limits.max_nstep},
      {"max_nstep_walk_steps", limits.max_nstep_walk_steps},
      {"max_sequence_steps", limits.max_sequence_steps},
      {"max_sequence_sample_steps", limits.max_sequence_sample_steps},
      {"max_open_episodes_per_connection", limits.max_open_episodes_per_connection},
      {"max_queued_reply_bytes", limits.max_queued_reply_bytes},
      {"max_buffered_bytes", limits.max_buffered_bytes},
      {"max_connections", limits.max_connections},
      {"max_table_bytes", limits.max_table_bytes},
      {"max_tables", limits.max_tables},
      {"idle_timeout_ms", limits.idle_timeout_ms},
      {"write_timeout_ms", limits.write_timeout_ms},
      {"socket_send_buffer_bytes", limits.socket_send_buffer_bytes},
      {"requests_per_turn", limits.requests_per_turn},
      {"learner_share", limits.learner_share},
      {"max_unauthenticated_connections", limits.max_unauthenticated_connections},
      {"auth_timeout_ms", limits.auth_timeout_ms},
      {"http_header_timeout_ms", limits.http_header_timeout_ms},
      {"http_max_connections", limits.http_max_connections},
      {"max_staging_bytes_per_connection", limits.max_staging_bytes_per_connection},
      {"max_staging_bytes", limits.max_staging_bytes},
      {"max_staging_arenas_per_connection", limits.max_staging_arenas_per_connection},
      {"max_staging_arenas", limits.max_staging_arenas},
      {"max_unread_descriptors_per_connection", limits.max_unread_descriptors_per_connection},
      {"max_queued_descriptors", limits.max_queued_descriptors},
      {"max_value_bytes", limits.max_value_bytes},
      {"max_values_bytes", limits.max_values_bytes},
      {"max_values", limits.max_values},
      {"max_publishes_per_connection", limits.max_publishes_per_connection}};
}

}  // namespace replayd::service::commands
