#include "service/protocol_description.h"

#include <boost/json.hpp>

#include "core/dtype.h"
#include "service/commands/command_table.h"
#include "service/protocol/reply.h"

namespace replayd::service {
namespace json = boost::json;
namespace {

const char* waits_on_name(WaitsOn waits_on) {
  switch (waits_on) {
    case WaitsOn::nothing:
      return "nothing";
    case WaitsOn::rate_limiter:
      return "rate_limiter";
    case WaitsOn::snapshot:
      return "snapshot";
    case WaitsOn::earlier_inserts:
      return "earlier_inserts";
    case WaitsOn::value:
      return "value";
  }
  return "nothing";
}

const char* lane_name(Lane lane) {
  switch (lane) {
    case Lane::control:
      return "control";
    case Lane::explorer:
      return "explorer";
    case Lane::learner:
      return "learner";
  }
  return "control";
}

}  // namespace

std::string describe_protocol() {
  json::array ops;
  for (const Command& command : command_table()) {
    json::array fields;
    for (auto field : command.fields)
      fields.emplace_back(json::string(field));
    ops.push_back(json::object{{"name", command.name},
                               {"fields", std::move(fields)},
                               {"needs_table", command.needs_table},
                               {"batch", command.batch},
                               {"payload", command.takes_payload},
                               {"waits_on", waits_on_name(command.waits_on)},
                               {"lane", lane_name(command.lane)}});
  }
  json::array errors;
  for (WireError code : kWireErrors)
    errors.emplace_back(wire_error_name(code));
  json::array dtypes;
  for (int d = static_cast<int>(DType::boolean); d <= static_cast<int>(DType::float64); ++d)
    dtypes.emplace_back(json::string(dtype_name(static_cast<DType>(d))));
  return json::serialize(
      json::object{{"ops", std::move(ops)}, {"errors", std::move(errors)}, {"dtypes", dtypes}});
}

}  // namespace replayd::service
