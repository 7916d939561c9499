#include "service/commands/command_table.h"

#include <array>

#include "service/commands/handlers.h"

namespace replayd::service {
namespace {

namespace c = commands;
using Fields = std::span<const std::string_view>;

constexpr std::array<std::string_view, 4> kHelloFields{"protocol", "client", "token", "shm"};
constexpr std::array<std::string_view, 1> kTableField{"table"};
constexpr std::array<std::string_view, 2> kCreateFields{"table", "exist_ok"};
constexpr std::array<std::string_view, 3> kConfigureFields{"table", "rate_limiter",
                                                           "priority_exponent"};
constexpr std::array<std::string_view, 8> kInsertFields{
    "table", "n", "columns", "priorities", "timeout_ms", "staged", "version", "versions"};
constexpr std::array<std::string_view, 10> kAppendStepsFields{
    "table",         "n",      "columns", "priorities", "timeout_ms", "end",
    "final_columns", "staged", "version", "versions"};
constexpr std::array<std::string_view, 2> kKeysFields{"table", "n"};
constexpr std::array<std::string_view, 14> kSampleFields{
    "table", "n",       "beta",     "timeout_ms",  "nstep",         "gamma", "raw",
    "rows",  "batches", "versions", "min_version", "max_staleness", "value", "into"};
constexpr std::array<std::string_view, 8> kSampleMixedFields{
    "tables", "counts", "n", "beta", "timeout_ms", "rows", "versions", "bounds"};
constexpr std::array<std::string_view, 4> kPublishBeginFields{"name", "version", "arrays",
                                                              "staged"};
constexpr std::array<std::string_view, 2> kPublishPartFields{"upload", "offset"};
constexpr std::array<std::string_view, 1> kPublishCommitFields{"upload"};
constexpr std::array<std::string_view, 4> kFetchFields{"name", "newer_than", "timeout_ms",
                                                       "shared_memory"};
constexpr std::array<std::string_view, 1> kMapStagingFields{"bytes"};
constexpr std::array<std::string_view, 1> kUnmapStagingFields{"arena"};
constexpr std::array<std::string_view, 2> kOpenEpisodesFields{"table", "n"};
constexpr std::array<std::string_view, 4> kEndEpisodeFields{"table", "episode", "terminated",
                                                            "columns"};
constexpr std::array<std::string_view, 9> kSequenceFields{
    "table", "n", "length", "stride", "burn_in", "pad", "beta", "timeout_ms", "raw"};
constexpr std::array<std::string_view, 4> kReadStepsFields{"table", "n", "after", "raw"};

const std::array kCommands{
    Command{.name = "hello", .handler = c::hello, .fields = kHelloFields},
    Command{.name = "ping", .handler = c::ping, .fields = {}},
    Command{.name = "info", .handler = c::info, .fields = kTableField},
    Command{.name = "list_tables", .handler = c::list_tables, .fields = {}},
    Command{.name = "create_table", .handler = c::create_table, .fields = kCreateFields},
    Command{
        .name = "drop_table", .handler = c::drop_table, .fields = kTableField, .needs_table = true},
    Command{.name = "configure_table",
            .handler = c::configure_table,
            .fields = kConfigureFields,
            .needs_table = true},
    Command{.name = "reset_table",
            .handler = c::reset_table,
            .fields = kTableField,
            .needs_table = true},
    Command{.name = "insert",
            .handler = c::insert,
            .fields = kInsertFields,
            .needs_table = true,
            .table_kind = TableKind::items,
            .batch = true,
            .takes_payload = true,
            .waits_on = WaitsOn::rate_limiter,
            .lane = Lane::explorer},
    Command{.name = "sample",
            .handler = c::sample,
            .fields = kSampleFields,
            .needs_table = true,
            .batch = true,
            .waits_on = WaitsOn::rate_limiter,
            .lane = Lane::learner},
    Command{.name = "sample_mixed",
            .handler = c::sample_mixed,
            .fields = kSampleMixedFields,
            .batch = true,
            .waits_on = WaitsOn::rate_limiter,
            .lane = Lane::learner},
    Command{.name = "update_priorities",
            .handler = c::update_priorities,
            .fields = kKeysFields,
            .needs_table = true,
            .batch = true,
            .takes_payload = true,
            .lane = Lane::learner},
    Command{.name = "delete",
            .handler = c::delete_keys,
            .fields = kKeysFields,
            .needs_table = true,
            .batch = true,
            .takes_payload = true,
            .lane = Lane::learner},
    Command{
        .name = "snapshot", .handler = c::snapshot, .fields = {}, .waits_on = WaitsOn::snapshot},
    Command{.name = "open_episodes",
            .handler = c::open_episodes,
            .fields = kOpenEpisodesFields,
            .needs_table = true,
            .table_kind = TableKind::episodic,
            .batch = true,
            .lane = Lane::explorer},
    Command{.name = "append_steps",
            .handler = c::append_steps,
            .fields = kAppendStepsFields,
            .needs_table = true,
            .table_kind = TableKind::episodic,
            .batch = true,
            .takes_payload = true,
            .waits_on = WaitsOn::rate_limiter,
            .lane = Lane::explorer},
    Command{.name = "end_episode",
            .handler = c::end_episode,
            .fields = kEndEpisodeFields,
            .needs_table = true,
            .table_kind = TableKind::episodic,
            .takes_payload = true,
            .waits_on = WaitsOn::earlier_inserts,
            .lane = Lane::explorer},
    Command{.name = "sample_sequences",
            .handler = c::sample_sequences,
            .fields = kSequenceFields,
            .needs_table = true,
            .table_kind = TableKind::episodic,
            .batch = true,
            .waits_on = WaitsOn::rate_limiter,
            .lane = Lane::learner},
    Command{.name = "read_steps",
            .handler = c::read_steps,
            .fields = kReadStepsFields,
            .needs_table = true,
            .table_kind = TableKind::any,
            .batch = true,
            .lane = Lane::learner},
    Command{.name = "publish_begin", .handler = c::publish_begin, .fields = kPublishBeginFields},
    Command{.name = "publish_part",
            .handler = c::publish_part,
            .fields = kPublishPartFields,
            .takes_payload = true,
            .lane = Lane::explorer},
    Command{.name = "publish_commit", .handler = c::publish_commit, .fields = kPublishCommitFields},
    Command{.name = "fetch",
            .handler = c::fetch,
            .fields = kFetchFields,
            .waits_on = WaitsOn::value,
            .lane = Lane::learner},
    Command{
        .name = "map_table", .handler = c::map_table, .fields = kTableField, .needs_table = true},
    Command{.name = "map_staging", .handler = c::map_staging, .fields = kMapStagingFields},
    Command{.name = "unmap_staging", .handler = c::unmap_staging, .fields = kUnmapStagingFields},
};

}  // namespace

std::span<const metrics::OpLabel> metric_op_labels() {
  static const auto labels = [] {
    std::array<metrics::OpLabel, kCommands.size()> labels;
    for (std::size_t i = 0; i < kCommands.size(); ++i) {
      labels[i] = {kCommands[i].name, kCommands[i].waits_on == WaitsOn::rate_limiter};
    }
    return labels;
  }();
  return labels;
}

std::span<const Command> command_table() {
  return kCommands;
}

const Command* find_command(std::string_view op) {
  for (const Command& command : kCommands) {
    if (command.name == op) return &command;
  }
  return nullptr;
}

std::size_t command_index(const Command& command) {
  return static_cast<std::size_t>(&command - kCommands.data());
}

}  // namespace replayd::service
