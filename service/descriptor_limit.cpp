#include "service/descriptor_limit.h"

#include <sys/resource.h>

#include <spdlog/spdlog.h>

namespace replayd::service {

std::uint64_t descriptors_needed(const Limits& limits) {
  // Two listeners (Unix and TCP), each with max_connections; the TCP handshake gate's own;
  // a memfd per published value and per publish in progress (docs/VALUES.md).
  return 2 * std::uint64_t{limits.max_connections} + limits.max_unauthenticated_connections +
         limits.max_queued_descriptors + limits.max_tables + limits.http_max_connections +
         limits.max_values +
         std::uint64_t{limits.max_connections} * limits.max_publishes_per_connection +
         kReservedDescriptors;
}

std::uint64_t raise_descriptor_limit(const Limits& limits) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  const std::uint64_t needed = descriptors_needed(limits);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    spdlog::warn(
        "the descriptor limit (RLIMIT_NOFILE) is {}, below the {} that the limits allow "
        "clients to make the server hold (2 x max_connections, max_unauthenticated_connections, "
        "max_queued_descriptors, max_tables, http_max_connections, max_values, max_connections x "
        "max_publishes_per_connection and {} in reserve): raise it "
        "(ulimit -n) or lower those limits",
        static_cast<std::uint64_t>(limit.rlim_cur), needed, kReservedDescriptors);
  }
  return limit.rlim_cur;
}

}  // namespace replayd::service
