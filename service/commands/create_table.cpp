// `create_table` (docs/PROTOCOL.md): a table from its description; exist_ok accepts an
// existing table of the same shape, and otherwise names every part that differs.
#include <boost/json.hpp>

#include "service/commands/handlers.h"
#include "service/protocol/sample_reply.h"
#include "service/protocol/table_json.h"
#include "service/table_description.h"
#include "service/values/policy_versions.h"

namespace replayd::service::commands {
namespace json = boost::json;

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
    if (!exist_ok) {
      co_return make_error(ErrorCode::already_exists, "table '" + config.name + "' already exists");
    }
    const auto differences = table_differences(existing->table->config(), config);
    if (differences.empty()) {
      co_return reply_with(call,
                           json::serialize(json::object{{"table", table_info_json(*existing)}}));
    }
    std::string text;
    for (const auto& difference : differences)
      text += (text.empty() ? "" : "; ") + difference;
    co_return make_error(ErrorCode::already_exists,
                         "table '" + config.name +
                             "' already exists with a different description (existing vs "
                             "requested): " +
                             text);
  }
  if (service.tables.size() >= service.limits.max_tables) {
    co_return make_error(ErrorCode::resource_exhausted,
                         "the server already holds max_tables = " +
                             std::to_string(service.limits.max_tables) + " tables");
  }
  REPLAYD_CO_ASSIGN_OR_RETURN(
      auto table,
      Table::create(std::move(config), service.limits.max_table_bytes, service.column_memory));
  auto hosted = service.tables.add(std::move(table));
  adopt_policy_version(service, *hosted);
  co_return reply_with(call, json::serialize(json::object{{"table", table_info_json(*hosted)}}));
}

}  // namespace replayd::service::commands
