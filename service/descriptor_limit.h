// The process's descriptor limit against what the server's limits let clients make it hold:
// at start the soft RLIMIT_NOFILE is raised to the hard one, and a limit below the worst
// case (every connection, every descriptor queued in replies, every table's memfd, the
// metrics connections and a reserve for snapshots and accepting) is logged, naming the
// limits to lower. Threading: call once, before serving.
#pragma once

#include <cstdint>

#include "service/config.h"

namespace replayd::service {

// Descriptors kept free for what the server itself opens: snapshot files and pipes,
// listeners, the log, accepting a connection while others are open.
inline constexpr std::uint64_t kReservedDescriptors = 64;

// The descriptors `limits` allow the server to hold at once, the reserve included.
std::uint64_t descriptors_needed(const Limits& limits);

// Raises the soft descriptor limit as far as the hard one allows and returns it; warns
// when it is below descriptors_needed(limits).
std::uint64_t raise_descriptor_limit(const Limits& limits);

}  // namespace replayd::service
