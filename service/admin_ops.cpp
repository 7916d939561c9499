// Table administration and server facts: hello, ping, info, list/create/drop/reset table.
#include <chrono>

#include "service/ops.h"
#include "service/table_description.h"

namespace replayd::service {
namespace json = boost::json;

Result<std::shared_ptr<HostedTable>> find_table(ServiceContext& context, JsonReader& request) {
  REPLAYD_ASSIGN_OR_RETURN(std::string name, request.string("table"));
  auto hosted = context.tables.find(name);
  if (!hosted) return make_error(ErrorCode::not_found, "table '" + name + "' does not exist");
  return hosted;
}

json::object table_info_json(const HostedTable& hosted) {
  const Table& table = *hosted.table;
  const TableInfo info = table.info();
  const auto& c = info.counters;
  const SamplingMass mass = table.sampling_mass();
  return json::object{
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
                                {"expirations", c.expirations}}},
      {"rate_limiter", json::object{{"inserts", info.rate_limiter.inserts},
                                    {"samples", info.rate_limiter.samples},
                                    {"deletes", info.rate_limiter.deletes}}},
      {"waiting", json::object{{"inserts", hosted.insert_waiters.size()},
                               {"samples", hosted.sample_waiters.size()}}},
      {"mass", mass.total},
      {"min_mass", mass.min_positive},
  };
}

namespace {

json::object limits_json(const Limits& limits) {
  return json::object{{"max_frame_bytes", limits.max_frame_bytes},
                      {"max_meta_bytes", limits.max_meta_bytes},
                      {"max_batch_items", limits.max_batch_items},
                      {"max_waiting_per_connection", limits.max_waiting_per_connection},
                      {"max_queued_reply_bytes", limits.max_queued_reply_bytes},
                      {"max_connections", limits.max_connections},
                      {"max_table_bytes", limits.max_table_bytes},
                      {"max_tables", limits.max_tables},
                      {"idle_timeout_ms", limits.idle_timeout_ms},
                      {"write_timeout_ms", limits.write_timeout_ms}};
}

json::array all_table_infos(const ServiceContext& context) {
  json::array tables;
  for (const auto& hosted : context.tables.list())
    tables.push_back(table_info_json(*hosted));
  return tables;
}

}  // namespace

Result<std::string> op_hello(ServiceContext& context, JsonReader& request) {
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t protocol, request.uint_or("protocol", kProtocolVersion));
  REPLAYD_ASSIGN_OR_RETURN(auto client, request.optional_string("client"));
  (void)client;  // informational only
  // Checked by the Session before dispatch on connections that must authenticate.
  REPLAYD_ASSIGN_OR_RETURN(auto token, request.optional_string("token"));
  (void)token;
  REPLAYD_RETURN_IF_ERROR(request.finish());
  if (protocol != kProtocolVersion) {
    return make_error(ErrorCode::invalid_argument, "protocol " + std::to_string(protocol) +
                                                       " is not supported; this server speaks 1");
  }
  json::array names;
  for (const auto& hosted : context.tables.list())
    names.push_back(json::string(hosted->table->name()));
  return json::serialize(json::object{{"protocol", kProtocolVersion},
                                      {"server", std::string("replayd ") + kServerVersion},
                                      {"tables", std::move(names)},
                                      {"limits", limits_json(context.limits)}});
}

Result<std::string> op_ping(ServiceContext&, JsonReader& request) {
  REPLAYD_RETURN_IF_ERROR(request.finish());
  return std::string("{}");
}

Result<std::string> op_info(ServiceContext& context, JsonReader& request) {
  json::array tables;
  if (request.has("table")) {
    REPLAYD_ASSIGN_OR_RETURN(auto hosted, find_table(context, request));
    tables.push_back(table_info_json(*hosted));
  } else {
    tables = all_table_infos(context);
  }
  REPLAYD_RETURN_IF_ERROR(request.finish());
  const double uptime_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - context.started).count();
  return json::serialize(
      json::object{{"server", json::object{{"version", kServerVersion},
                                           {"protocol", kProtocolVersion},
                                           {"connections", context.sessions.size()},
                                           {"uptime_s", uptime_s}}},
                   {"tables", std::move(tables)}});
}

Result<std::string> op_list_tables(ServiceContext& context, JsonReader& request) {
  REPLAYD_RETURN_IF_ERROR(request.finish());
  return json::serialize(json::object{{"tables", all_table_infos(context)}});
}

Result<std::string> op_create_table(ServiceContext& context, JsonReader& request) {
  const json::value* description = request.value("table");
  if (!description) return request.error("table", "is required (a table description)");
  REPLAYD_ASSIGN_OR_RETURN(bool exist_ok, request.boolean_or("exist_ok", false));
  REPLAYD_RETURN_IF_ERROR(request.finish());
  REPLAYD_ASSIGN_OR_RETURN(TableConfig config,
                           parse_table_description(*description, "table", context.seed_source()));
  if (auto existing = context.tables.find(config.name)) {
    if (exist_ok && same_table_shape(existing->table->config(), config)) {
      return json::serialize(json::object{{"table", table_info_json(*existing)}});
    }
    return make_error(ErrorCode::already_exists,
                      "table '" + config.name + "' already exists" +
                          (exist_ok ? " with a different description" : ""));
  }
  if (context.tables.size() >= context.limits.max_tables) {
    return make_error(ErrorCode::resource_exhausted, "the server already holds max_tables = " +
                                                         std::to_string(context.limits.max_tables) +
                                                         " tables");
  }
  REPLAYD_ASSIGN_OR_RETURN(auto table,
                           Table::create(std::move(config), context.limits.max_table_bytes));
  auto hosted = context.tables.add(std::move(table));
  return json::serialize(json::object{{"table", table_info_json(*hosted)}});
}

Result<std::string> op_drop_table(ServiceContext& context, JsonReader& request) {
  REPLAYD_ASSIGN_OR_RETURN(auto hosted, find_table(context, request));
  REPLAYD_RETURN_IF_ERROR(request.finish());
  context.tables.drop(hosted->table->name());
  return std::string("{}");
}

Result<std::string> op_reset_table(ServiceContext& context, JsonReader& request) {
  REPLAYD_ASSIGN_OR_RETURN(auto hosted, find_table(context, request));
  REPLAYD_RETURN_IF_ERROR(request.finish());
  hosted->table->reset();
  table_changed(*hosted);
  return std::string("{}");
}

}  // namespace replayd::service
