// The rule that a command works on one kind of table (Command::table_kind), in one place:
// dispatch applies it to every entry that declares a kind, and `sample` to its "nstep" form.
// Threading: none (pure).
#pragma once

#include <string_view>

#include "core/result.h"
#include "core/table/table.h"
#include "service/commands/command.h"

namespace replayd::service {

// Ok when `table` is of `kind`; else invalid_argument naming the table and what `op` needs.
Status check_table_kind(const Table& table, TableKind kind, std::string_view op);

}  // namespace replayd::service
