// The operations of docs/PROTOCOL.md, one function each, shared by dispatch.cpp.
// Each reads its keys through a JsonReader (strict: unknown keys are rejected) and returns
// the reply, or an Error that dispatch turns into an error reply.
// Threading: io_context thread only.
#pragma once

#include <boost/json.hpp>
#include <string>

#include "service/dispatch.h"
#include "service/json_reader.h"

namespace replayd::service {

Result<std::string> op_hello(ServiceContext& context, JsonReader& request);
Result<std::string> op_ping(ServiceContext& context, JsonReader& request);
Result<std::string> op_info(ServiceContext& context, JsonReader& request);
Result<std::string> op_list_tables(ServiceContext& context, JsonReader& request);
Result<std::string> op_create_table(ServiceContext& context, JsonReader& request);
Result<std::string> op_drop_table(ServiceContext& context, JsonReader& request);
Result<std::string> op_reset_table(ServiceContext& context, JsonReader& request);

Result<PreparedInsert> prepare_insert(ServiceContext& context, JsonReader& request, Frame& frame);
Result<PreparedSample> prepare_sample(ServiceContext& context, JsonReader& request);
Result<std::string> op_update_priorities(ServiceContext& context, JsonReader& request,
                                         const Frame& frame);
Result<std::string> op_delete(ServiceContext& context, JsonReader& request, const Frame& frame);

// Shared helpers.
Result<std::shared_ptr<HostedTable>> find_table(ServiceContext& context, JsonReader& request);
boost::json::object table_info_json(const HostedTable& hosted);

}  // namespace replayd::service
