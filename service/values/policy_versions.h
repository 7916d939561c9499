// Policy versions on the server's side (docs/VERSIONS.md): tables that follow a published
// value (TableConfig::versions.value) take its version as their current policy version when
// they join the server and at every commit of the value; a table with drop_behind k then
// drops the items more than k versions behind. And the bound of a version-bounded sample:
// "min_version", or "max_staleness" relative to a value's current version.
// Threading: io_context thread only.
#pragma once

#include <cstdint>

#include "core/result.h"
#include "service/protocol/json_reader.h"
#include "service/service_context.h"
#include "service/table_registry.h"

namespace replayd::service {

// The table joined the server (created, restored, configured): its policy version becomes
// its followed value's current one, when that value has a version.
void adopt_policy_version(ServiceContext& service, HostedTable& hosted);

// `value` has a new current version: every table following it takes the version, tables
// with drop_behind drop the items behind it (waking their waiters). O(tables), plus
// O(capacity) for a table that drops anything.
void follow_committed_value(ServiceContext& service, const PublishedValue& value);

// A sample request's version bound: 0 (none), the request's "min_version", or, for
// "max_staleness": k, the current version of "value" (default the table's followed value)
// less k (0 while it is k or less). invalid_argument when both are given, or when
// max_staleness names no value. Read once per request; resolve() gives the bound now (the
// value may be published again while the sample waits).
class VersionBound {
 public:
  static Result<VersionBound> parse(JsonReader& args, const Table& table);
  std::uint64_t resolve(const ValueStore& values) const;
  bool bounded() const { return min_version_ != 0 || max_staleness_.has_value(); }

 private:
  std::uint64_t min_version_ = 0;
  std::optional<std::uint64_t> max_staleness_;
  std::string value_;
};

}  // namespace replayd::service
