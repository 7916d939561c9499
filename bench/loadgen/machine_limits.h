// Machine limits measured in the same run as the load, so that results read as ratios:
// memcpy bandwidth, Unix-socket and TCP-loopback bandwidth between two processes, and the
// round trip of a 64-byte message between two processes over a Unix socket.
// Each probe forks a helper process; call from a process with no other threads.
#pragma once

namespace replayd::loadgen {

struct MachineLimits {
  double memcpy_gb_s = 0;        // one memcpy of 64 MiB repeated; bytes copied per second (1e9)
  double unix_socket_gb_s = 0;   // 1 MiB writes, one process to another, bytes received per s
  double tcp_loopback_gb_s = 0;  // the same over 127.0.0.1
  double unix_rtt_us_p50 = 0;    // 64-byte ping-pong between two processes
  double unix_rtt_us_p99 = 0;
};

// Runs each probe for about `seconds_each`. Throws std::runtime_error when a socket, pipe
// or fork fails.
MachineLimits measure_machine_limits(double seconds_each);

}  // namespace replayd::loadgen
