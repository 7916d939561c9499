// The protocol's tables as data (`replayd --describe-protocol`): every operation of the command
// table with what its entry declares, the wire error codes and the dtypes. scripts/protocol-tables
// renders docs/PROTOCOL.md's tables from it, and tests/python/test_protocol_tables.py checks the
// document and both clients against it.
#pragma once

#include <string>

namespace replayd::service {

// One JSON document: {"ops": [...], "errors": [...], "dtypes": [...]}.
std::string describe_protocol();

}  // namespace replayd::service
