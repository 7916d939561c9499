// `configure_table` (docs/PROTOCOL.md): changes a table's settings at run time: its rate
// limiter ("rate_limiter", as in a description; e.g. none while a dataset is loaded, then a
// samples-per-insert ratio) and its prioritized sampler's exponent ("priority_exponent").
// Both are validated before either changes. Requests waiting on the table are woken and
// judged by the new settings at once, in arrival order (one the new limiter admits goes on;
// the others wait, until their timeout). Snapshots keep the new settings; the description
// (info) shows them, so a later create_table with exist_ok must state them.
#include <boost/json.hpp>
#include <optional>

#include "service/commands/handlers.h"
#include "service/protocol/table_json.h"
#include "service/table_description.h"

namespace replayd::service::commands {
namespace json = boost::json;

asio::awaitable<Result<Reply>> configure_table(Call& call) {
  Table& table = *call.table->table;
  const json::value* limiter = call.args.value("rate_limiter");
  const json::value* exponent = call.args.value("priority_exponent");
  if (!limiter && !exponent) {
    co_return call.args.error("rate_limiter",
                              "nothing to change: give rate_limiter and/or priority_exponent");
  }
  std::optional<RateLimiterConfig> next_limiter;
  if (limiter) {
    REPLAYD_CO_ASSIGN_OR_RETURN(next_limiter,
                                parse_rate_limiter_description(*limiter, "rate_limiter"));
  }
  std::optional<double> next_exponent;
  if (exponent) {
    REPLAYD_CO_ASSIGN_OR_RETURN(next_exponent, call.args.number("priority_exponent"));
  }
  // The limiter is checked before the exponent changes, so that a refusal changes nothing.
  if (next_limiter) REPLAYD_CO_RETURN_IF_ERROR(table.check_rate_limiter(*next_limiter));
  if (next_exponent) REPLAYD_CO_RETURN_IF_ERROR(table.set_priority_exponent(*next_exponent));
  if (next_limiter) REPLAYD_CO_RETURN_IF_ERROR(table.set_rate_limiter(*next_limiter));
  table_changed(*call.table);
  co_return reply_with(call,
                       json::serialize(json::object{{"table", table_info_json(*call.table)}}));
}

}  // namespace replayd::service::commands
