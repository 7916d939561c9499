// Server configuration: listeners, limits and tables, read from a JSON file
// (docs/CONFIG.md documents every key with its default and unit) and overridden by flags.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/table/table_config.h"

namespace replayd::service {

struct Limits {
  std::uint64_t max_frame_bytes = std::uint64_t{256} << 20;  // bytes, header+meta+payload
  std::uint32_t max_meta_bytes = 64 << 10;                   // bytes of JSON per frame
  std::uint64_t max_batch_items = 65536;                     // items per insert/sample/update
  std::uint32_t max_waiting_per_connection = 1024;           // parked requests
  // Work a request may ask of an episodic table, bounded before it starts: the k of an
  // n-step sample, and the steps (burn_in + length) of a sequence sample. Each costs the
  // thread per draw, and a window index of that reach costs every later append and eviction.
  std::uint32_t max_nstep = 1024;           // steps
  std::uint32_t max_sequence_steps = 4096;  // steps
  // Steps one n-step sample walks in all (n x nstep): unlike a sequence's, they are not in
  // the reply, so max_frame_bytes does not bound them. 2^22 steps take the thread ~11 ms
  // (2^24 measured 44-65 ms on a 1M-step table, a new window index's build included).
  std::uint64_t max_nstep_walk_steps = std::uint64_t{1} << 22;
  // Steps one sequence sample reads in all (n x (burn_in + length)): 2^19 take the thread
  // about 10 ms (2^20 measured 14-56 ms with a new index's build, 4M steps 90-140 ms).
  std::uint64_t max_sequence_sample_steps = std::uint64_t{1} << 19;
  // Episodes one connection may hold open in one table, so that no writer can use up the
  // table's 65,536 for the others.
  std::uint32_t max_open_episodes_per_connection = 8192;
  std::uint64_t max_queued_reply_bytes = std::uint64_t{64} << 20;  // bytes, then stop reading
  // Queued replies and parked payloads of all connections together: past it, every
  // connection that holds any stops being read until they drain (docs/OPERATIONS.md).
  std::uint64_t max_buffered_bytes = std::uint64_t{1} << 30;
  std::uint32_t max_connections = 4096;  // open client connections per listener (Unix, TCP)
  // TCP connections (when a token is required) whose first request is not complete yet;
  // a new one closes the oldest. They hold no session and none of max_connections.
  std::uint32_t max_unauthenticated_connections = 64;
  // A TCP connection that must authenticate is closed unless its first request (hello with
  // the token) arrives whole within this long, ms.
  std::uint64_t auth_timeout_ms = 10000;
  std::uint64_t max_table_bytes = std::uint64_t{64} << 30;  // data bytes per table
  std::uint32_t max_tables = 256;                           // tables per server
  // Bytes every table may take together (each counted as table_bytes(): what it may allocate
  // once full); 0: the machine's memory, or the cgroup's limit when lower
  // (service/table_memory.h). Checked when a table is created.
  std::uint64_t max_tables_total_bytes = 0;
  // A connection with no complete request for this long, and nothing waiting or queued, is
  // closed (a frame that takes longer to arrive counts as idle). 0 disables.
  std::uint64_t idle_timeout_ms = 300000;
  // A connection with queued replies of which no byte could be written for this long (the
  // client stopped reading) is closed. 0 disables.
  std::uint64_t write_timeout_ms = 60000;
  // SO_SNDBUF of each client socket, bytes (the kernel caps it at net.core.wmem_max). The part
  // of a sample reply that fits is written from the table's rows without a copy. 0: the
  // kernel's default.
  std::uint64_t socket_send_buffer_bytes = 4 << 20;
  // Frames one connection handles before other connections get a turn (1 - 65536).
  std::uint32_t requests_per_turn = 64;
  // The share of the thread's counted work learners (connections that sample) get while
  // explorers saturate it, 0 - 1; 0 turns the policy off (docs/ARCHITECTURE.md,
  // "Scheduling").
  double learner_share = 0.7;
  // Metrics HTTP listener: a request head must arrive whole within this long (ms) of when
  // the server starts waiting for it; and at most this many HTTP connections are open, a
  // new one closing the one that has waited longest for its head.
  std::uint64_t http_header_timeout_ms = 5000;
  std::uint32_t http_max_connections = 64;
  // Staging arenas of the shared-memory plane (docs/SHM.md), bytes: what one connection may
  // hold, and what all connections together may hold; each is counted before it is created.
  // Arenas count in whole pages.
  std::uint64_t max_staging_bytes_per_connection = std::uint64_t{256} << 20;
  std::uint64_t max_staging_bytes = std::uint64_t{2} << 30;
  // Staging arenas, in number: each is a mapping in the server and a file in the client.
  std::uint32_t max_staging_arenas_per_connection = 64;
  std::uint32_t max_staging_arenas = 4096;
  // Replies carrying a descriptor (map_table, map_staging) one connection may have that it
  // has not read yet, and descriptors the server may hold in replies not yet written: each
  // is an open file, and the rest of the server's descriptors stay for accepting
  // connections, snapshots and tables.
  std::uint32_t max_unread_descriptors_per_connection = 64;
  std::uint32_t max_queued_descriptors = 1024;
  // Published values (docs/VALUES.md): bytes of one value, bytes of every value held and
  // every publish in progress together, names, and publishes one connection may have in
  // progress. Each is checked by publish_begin before anything is allocated.
  std::uint64_t max_value_bytes = std::uint64_t{2} << 30;
  std::uint64_t max_values_bytes = std::uint64_t{4} << 30;
  std::uint32_t max_values = 256;
  std::uint32_t max_publishes_per_connection = 2;
  // File tiers (docs/FILE_TIER.md): a segment file takes no more rows once it holds this
  // many bytes; a segment is deleted once every row in it was removed.
  std::uint64_t tier_segment_bytes = std::uint64_t{256} << 20;
};

struct ServerConfig {
  std::string unix_path = "/tmp/replayd.sock";     // empty: no Unix listener
  std::string tcp_address = "127.0.0.1:7700";      // HOST:PORT, port 0 = ephemeral; empty: none
  std::string metrics_address = "127.0.0.1:9700";  // HTTP /metrics; HOST:PORT; empty: none
  std::string log_level = "info";                  // trace, debug, info, warn, error, critical, off
  std::string ready_file;                          // written once listening; empty: none
  unsigned unix_mode = 0660;                       // permission bits of the Unix socket file
  std::string auth_token;                          // required in hello on TCP; empty: none
  bool insecure = false;  // allow a non-loopback TCP address without auth_token
  // Tables' columns in shared memory, offered to same-uid Unix clients (docs/SHM.md).
  bool shared_memory = true;
  Limits limits;
  std::vector<TableConfig> tables;
  // Snapshots (docs/SNAPSHOT.md).
  std::string data_dir;  // where snapshots live; empty: snapshots disabled
  // Where file tiers keep their segments (docs/FILE_TIER.md), a directory per table; empty:
  // no table may have a file tier.
  std::string tier_dir;
  std::uint32_t snapshot_interval_s = 0;  // seconds between periodic snapshots; 0: none
  std::uint32_t snapshot_keep = 3;        // complete snapshots kept, 1 - 1000
  // Start with empty tables when snapshots exist but none can be restored (they are then
  // all kept); false: refuse to start.
  bool allow_empty_start = false;
  std::uint32_t snapshot_test_pause_ms = 0;  // test-only flag; 0 in production
  // How long the owner thread keeps polling for work after the last handler ran before it
  // sleeps, microseconds, 0 - 100000 (service/owner_loop.h); 0: it sleeps at once. For a
  // server with a core of its own: it trades that core's idle time for cheaper, faster
  // requests (docs/OPERATIONS.md, "Busy polling").
  std::uint32_t busy_poll_us = 0;
};

// The largest busy_poll_us the config file or --busy-poll-us accepts: 0.1 s.
inline constexpr std::uint32_t kMaxBusyPollUs = 100000;

// Parses a whole config document. `seed_source` gives seeds to tables that state none.
// Errors name the key ("limits.max_batch_items: expected a non-negative integer").
Result<ServerConfig> parse_server_config(std::string_view text, std::uint64_t (*seed_source)());

// Splits "host:port" (IPv6 as "[::1]:7700"); invalid_argument when malformed.
struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};
Result<HostPort> parse_host_port(std::string_view text);

// Why `token` is not acceptable as auth.token or REPLAYD_TOKEN (1-1024 printable ASCII
// characters, no spaces); nullopt when it is.
std::optional<std::string> token_problem(std::string_view token);

// Parses a permission mode written in octal ("0660", "660"); invalid_argument unless it is
// 1-4 octal digits of at most 0777.
Result<unsigned> parse_unix_mode(std::string_view text);

}  // namespace replayd::service
