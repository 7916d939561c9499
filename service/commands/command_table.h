// The command table: every operation of docs/PROTOCOL.md, one entry each, in protocol order.
// The runner looks requests up here; a command's index labels its metrics
// (replayd_requests_total{op}); tests check docs/PROTOCOL.md and both clients against it.
// Adding an operation: one handler in service/commands/, one entry here.
// Threading: immutable; any thread.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "service/commands/command.h"

namespace replayd::service {

std::span<const Command> command_table();
// The command named `op`, or nullptr. O(number of commands).
const Command* find_command(std::string_view op);
// The index of `command` in command_table() (its metrics label index).
std::size_t command_index(const Command& command);

}  // namespace replayd::service
