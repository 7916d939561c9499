// Table descriptions in JSON: the same object describes a table in the config file and in a
// client's create_table request (docs/CONFIG.md, "tables"). Parsing is strict: unknown keys,
// wrong types and impossible values are errors that name the key.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/table/table_config.h"

namespace replayd::service {

// Parses one description at `path` (for messages, e.g. "tables[1]"). `default_seed` is used
// when the description has no "seed". Checks JSON shape and value ranges; whether the table
// as a whole is possible is checked by Table::create.
Result<TableConfig> parse_table_description(const boost::json::value& value,
                                            const std::string& path, std::uint64_t default_seed);

// The resolved description of a table: every key present, the rate limiter in "custom" form
// with unbounded diffs as null. parse_table_description(describe_table(c)) == c.
boost::json::object describe_table(const TableConfig& config);

// What differs between two configurations, ignoring the seed, one phrase per difference in
// the order of the description's keys, `a`'s value first: "capacity 1000 vs 2000",
// "field 'obs' shape [4] vs [8]", "field 'x' only in the request". Empty when they describe
// the same table. The priority exponent counts only when both samplers are prioritized.
std::vector<std::string> table_differences(const TableConfig& a, const TableConfig& b);

// A rate limiter as a description's "rate_limiter" gives it (at `path`, for messages).
Result<RateLimiterConfig> parse_rate_limiter_description(const boost::json::value& value,
                                                         const std::string& path);

// Whether two configurations describe the same table, ignoring the seed.
bool same_table_shape(const TableConfig& a, const TableConfig& b);

}  // namespace replayd::service
