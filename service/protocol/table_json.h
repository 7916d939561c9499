// JSON views of tables and limits shared by the info, list_tables, create_table and hello
// replies (docs/PROTOCOL.md, `info`).
// Threading: io_context thread only.
#pragma once

#include <boost/json.hpp>

#include "service/service_context.h"

namespace replayd::service::commands {

boost::json::object table_info_json(const HostedTable& hosted);
boost::json::array all_table_infos(const ServiceContext& context);
boost::json::object limits_json(const Limits& limits);

}  // namespace replayd::service::commands
