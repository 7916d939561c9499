// `info` and `list_tables`: server facts and table state (docs/PROTOCOL.md).
#include <boost/json.hpp>
#include <chrono>

#include "service/commands/handlers.h"
#include "service/protocol/table_json.h"

namespace replayd::service::commands {
namespace json = boost::json;

namespace {

// What connections hold through the shared-memory plane (docs/SHM.md): host memory and
// descriptors no table accounts for.
json::object plane_json(const shm::PlaneBudget& plane) {
  return json::object{{"staging_arenas", plane.arenas},
                      {"staging_bytes", plane.staging_bytes},
                      {"queued_descriptors", plane.queued_descriptors},
                      {"dropped_table_bytes_mapped", plane.dropped_block_bytes}};
}

// Published values (docs/VALUES.md): each name's version, bytes, arrays and waiting
// fetches; and what publishes in progress hold.
json::array values_json(const ValueStore& store) {
  json::array values;
  for (const auto& [name, value] : store.values()) {
    json::object entry{{"name", name},
                       {"version", nullptr},
                       {"bytes", 0},
                       {"arrays", 0},
                       {"fetchers_waiting", value->fetchers.size()}};
    if (value->current) {
      entry["version"] = value->current->version;
      entry["bytes"] = value->current->bytes;
      entry["arrays"] = value->current->arrays.size();
    }
    values.push_back(std::move(entry));
  }
  return values;
}

}  // namespace

asio::awaitable<Result<Reply>> info(Call& call) {
  json::array tables;
  if (call.args.has("table")) {
    REPLAYD_CO_ASSIGN_OR_RETURN(std::string name, call.args.string("table"));
    auto hosted = call.service.tables.find(name);
    if (!hosted) co_return make_error(ErrorCode::not_found, "table '" + name + "' does not exist");
    tables.push_back(table_info_json(*hosted));
  } else {
    tables = all_table_infos(call.service);
  }
  const ServiceContext& service = call.service;
  const double uptime_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - service.started).count();
  co_return reply_with(
      call, json::serialize(json::object{
                {"server", json::object{{"version", kServerVersion},
                                        {"protocol", kProtocolVersion},
                                        {"connections", service.sessions.size()},
                                        {"uptime_s", uptime_s},
                                        {"shared_memory", service.column_memory != nullptr},
                                        {"staging_bytes", service.plane.staging_bytes},
                                        {"plane", plane_json(service.plane)},
                                        {"values", values_json(service.values)},
                                        {"values_bytes", service.values.held_bytes()},
                                        {"publishing_bytes", service.values.upload_bytes()}}},
                {"tables", std::move(tables)}}));
}

asio::awaitable<Result<Reply>> list_tables(Call& call) {
  co_return reply_with(call,
                       json::serialize(json::object{{"tables", all_table_infos(call.service)}}));
}

}  // namespace replayd::service::commands
