// `create_table` (docs/PROTOCOL.md): a table from its description; exist_ok accepts an
// existing table of the same shape, and otherwise names every part that differs.
// A table is refused before anything is allocated when it could not be filled within the
// memory tables may take (service/table_memory.h). A large table (kOffThreadBytes or more
// of bookkeeping and data to set up) is created on a thread of its own while this request
// is suspended (service/waiting/off_thread.h): other clients are served meanwhile.
#include <spdlog/spdlog.h>
#include <boost/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>

#include "service/commands/handlers.h"
#include "service/protocol/sample_reply.h"
#include "service/protocol/table_json.h"
#include "service/table_description.h"
#include "service/table_memory.h"
#include "service/tier/tier_setup.h"
#include "service/values/policy_versions.h"
#include "service/waiting/off_thread.h"

namespace replayd::service::commands {
namespace json = boost::json;
namespace {

// Tables that may take this many bytes or more are created off the io_context thread.
constexpr std::uint64_t kOffThreadBytes = std::uint64_t{64} << 20;
// At most this many tables are being created off the thread at once (each a thread).
constexpr std::uint32_t kMaxCreating = 4;
// Creations that take longer than this are logged.
constexpr auto kLoggedCreation = std::chrono::milliseconds(100);

// The reply to a create of a name that exists: its info when exist_ok and the descriptions
// match, else already_exists naming every difference.
Result<Reply> existing_reply(Call& call, const HostedTable& existing, const TableConfig& config,
                             bool exist_ok) {
  if (!exist_ok) {
    return make_error(ErrorCode::already_exists, "table '" + config.name + "' already exists");
  }
  const auto differences = table_differences(existing.table->config(), config);
  if (differences.empty()) {
    return reply_with(call, json::serialize(json::object{{"table", table_info_json(existing)}}));
  }
  std::string text;
  for (const auto& difference : differences)
    text += (text.empty() ? "" : "; ") + difference;
  return make_error(ErrorCode::already_exists,
                    "table '" + config.name +
                        "' already exists with a different description (existing vs "
                        "requested): " +
                        text);
}

}  // namespace

asio::awaitable<Result<Reply>> create_table(Call& call) {
  ServiceContext& service = call.service;
  const json::value* description = call.args.value("table");
  if (!description) co_return call.args.error("table", "is required (a table description)");
  REPLAYD_CO_ASSIGN_OR_RETURN(bool exist_ok, call.args.boolean_or("exist_ok", false));
  REPLAYD_CO_ASSIGN_OR_RETURN(
      TableConfig config, parse_table_description(*description, "table", service.seed_source()));
  REPLAYD_CO_RETURN_IF_ERROR(commands::check_item_fits_frames(
      config, service.limits.max_frame_bytes, "table '" + config.name + "'"));
  if (auto existing = service.tables.find(config.name)) {
    co_return existing_reply(call, *existing, config, exist_ok);
  }
  if (service.tables.size() + service.tables_creating >= service.limits.max_tables) {
    co_return make_error(ErrorCode::resource_exhausted,
                         "the server already holds max_tables = " +
                             std::to_string(service.limits.max_tables) + " tables");
  }
  REPLAYD_CO_RETURN_IF_ERROR(validate_table_config(config, service.limits.max_table_bytes));
  REPLAYD_CO_RETURN_IF_ERROR(check_file_tier_allowed(service, config));
  REPLAYD_CO_RETURN_IF_ERROR(check_table_fits_memory(
      config, tables_promised_bytes(service.tables) + service.tables_creating_bytes,
      tables_memory_budget(service.limits)));

  const auto promised = static_cast<std::uint64_t>(table_bytes(config).total());
  const auto started = std::chrono::steady_clock::now();
  std::optional<Result<std::unique_ptr<Table>>> created;
  // A table with a file tier keeps its columns in private memory (never mapped by clients:
  // the pages of its cold rows are given back) and its segments in a directory of its own.
  ColumnMemorySource* memory = config.file_tier.enabled() ? nullptr : service.column_memory;
  std::string tier_dir;
  if (config.file_tier.enabled()) {
    std::function<Result<std::string>()> make_dir = [root = service.tier_dir, name = config.name,
                                                     id = service.next_tier_id++] {
      return make_tier_dir(root, name, id);
    };
    Result<std::string> made_dir = co_await run_off_thread(std::move(make_dir));
    if (!made_dir) co_return made_dir.error();
    tier_dir = std::move(made_dir).value();
  }
  if (promised < kOffThreadBytes) {
    created.emplace(Table::create(config, service.limits.max_table_bytes, memory));
  } else {
    if (service.tables_creating >= kMaxCreating) {
      co_return make_error(ErrorCode::resource_exhausted,
                           std::to_string(kMaxCreating) +
                               " large tables are being created already; create table '" +
                               config.name + "' once one of them is done");
    }
    // Counted meanwhile against max_tables and the tables' memory, so that concurrent
    // creates cannot together exceed them.
    ++service.tables_creating;
    service.tables_creating_bytes += promised;
    // A named function, not a temporary in the co_await expression: g++ 12 destroys such
    // temporaries of a coroutine twice.
    std::function<Result<std::unique_ptr<Table>>()> make =
        [config, max_bytes = service.limits.max_table_bytes, memory] {
          return Table::create(config, max_bytes, memory);
        };
    auto made = co_await run_off_thread(std::move(make));
    created.emplace(std::move(made));
    --service.tables_creating;
    service.tables_creating_bytes -= promised;
  }
  const auto took = std::chrono::steady_clock::now() - started;
  if (took >= kLoggedCreation) {
    spdlog::info("table '{}' created in {} ms ({} bytes once full){}", config.name,
                 std::chrono::duration_cast<std::chrono::milliseconds>(took).count(), promised,
                 promised < kOffThreadBytes ? "" : ", off the server's thread");
  }
  // A directory made for a table that is not added goes (its FileTier never exists).
  const auto drop_tier_dir = [&] {
    if (!tier_dir.empty())
      service.io_pool->submit([dir = tier_dir] {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
      });
  };
  if (!*created) {
    drop_tier_dir();
    co_return created->error();
  }
  // Another create of the same name may have finished while this one was being made.
  if (auto existing = service.tables.find(config.name)) {
    drop_tier_dir();
    co_return existing_reply(call, *existing, config, exist_ok);
  }
  auto hosted = service.tables.add(std::move(*created).value());
  if (!tier_dir.empty()) {
    attach_file_tier(service, *hosted, tier_dir, co_await asio::this_coro::executor);
  }
  adopt_policy_version(service, *hosted);
  co_return reply_with(call, json::serialize(json::object{{"table", table_info_json(*hosted)}}));
}

}  // namespace replayd::service::commands
