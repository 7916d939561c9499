#include "service/commands/command_table.h"

#include <array>

#include "service/commands/handlers.h"

namespace replayd::service {
namespace {

namespace c = commands;
using Fields = std::span<const std::string_view>;

constexpr std::array<std::string_view, 3> kHelloFields{"protocol", "client", "token"};
constexpr std::array<std::string_view, 1> kTableField{"table"};
constexpr std::array<std::string_view, 2> kCreateFields{"table", "exist_ok"};
constexpr std::array<std::string_view, 5> kInsertFields{"table", "n", "columns", "priorities",
                                                        "timeout_ms"};
constexpr std::array<std::string_view, 7> kAppendStepsFields{
    "table", "n", "columns", "priorities", "timeout_ms", "end", "final_columns"};
constexpr std::array<std::string_view, 2> kKeysFields{"table", "n"};
constexpr std::array<std::string_view, 7> kSampleNstepFields{
    "table", "n", "beta", "timeout_ms", "nstep", "gamma", "raw"};
constexpr std::array<std::string_view, 2> kOpenEpisodesFields{"table", "n"};
constexpr std::array<std::string_view, 4> kEndEpisodeFields{"table", "episode", "terminated",
                                                           "columns"};
constexpr std::array<std::string_view, 9> kSequenceFields{
    "table", "n", "length", "stride", "burn_in", "pad", "beta", "timeout_ms", "raw"};
constexpr std::array<std::string_view, 4> kReadStepsFields{"table", "n", "after", "raw"};

// name, handler, fields, needs_table, batch, takes_payload, waits_on, lane
const std::array kCommands{
    Command{"hello", c::hello, kHelloFields},
    Command{"ping", c::ping, {}},
    Command{"info", c::info, kTableField},
    Command{"list_tables", c::list_tables, {}},
    Command{"create_table", c::create_table, kCreateFields},
    Command{"drop_table", c::drop_table, kTableField, true},
    Command{"reset_table", c::reset_table, kTableField, true},
    Command{"insert", c::insert, kInsertFields, true, true, true, WaitsOn::rate_limiter,
            Lane::explorer},
    Command{"sample", c::sample, kSampleNstepFields, true, true, false, WaitsOn::rate_limiter,
            Lane::learner},
    Command{"update_priorities", c::update_priorities, kKeysFields, true, true, true,
            WaitsOn::nothing, Lane::learner},
    Command{"delete", c::delete_keys, kKeysFields, true, true, true, WaitsOn::nothing,
            Lane::learner},
    Command{"snapshot", c::snapshot, {}, false, false, false, WaitsOn::snapshot},
    Command{"open_episodes", c::open_episodes, kOpenEpisodesFields, true, true, false,
            WaitsOn::nothing, Lane::explorer},
    Command{"append_steps", c::append_steps, kAppendStepsFields, true, true, true,
            WaitsOn::rate_limiter, Lane::explorer},
    Command{"end_episode", c::end_episode, kEndEpisodeFields, true, false, true,
            WaitsOn::earlier_inserts, Lane::explorer},
    Command{"sample_sequences", c::sample_sequences, kSequenceFields, true, true, false,
            WaitsOn::rate_limiter, Lane::learner},
    Command{"read_steps", c::read_steps, kReadStepsFields, true, true, false, WaitsOn::nothing,
            Lane::learner},
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
