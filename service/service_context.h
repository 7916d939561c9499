// ServiceContext: the state every connection shares: tables, limits, and server facts for
// `hello`/`info`. Owned by the Server; sessions hold a reference that outlives them.
// Threading: io_context thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>

#include "metrics/server_metrics.h"
#include "service/config.h"
#include "service/scheduler.h"
#include "service/shm/connection_plane.h"
#include "service/shm/shared_columns.h"
#include "service/table_registry.h"
#include "service/tier/io_pool.h"
#include "service/values/value_store.h"
#include "service/waiting/wait_queue.h"

namespace replayd::service {

inline constexpr const char* kServerVersion = REPLAYD_VERSION;

class Session;
class Snapshotter;

// The monotonic time in milliseconds (never 0) that tables stamp on stored items and age
// draws with (Table::set_now_ms): handlers set it just before they store or draw.
inline std::uint64_t replay_now_ms() {
  using namespace std::chrono;
  return static_cast<std::uint64_t>(
             duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count()) +
         1;
}

// The request op labels of the metrics: the command table's names
// (service/commands/command_table.cpp).
std::span<const metrics::OpLabel> metric_op_labels();

struct ServiceContext {
  TableRegistry tables;
  // Large tables being created off the io_context thread (create_table), and the bytes
  // they may take: counted against max_tables and the tables' memory meanwhile.
  std::uint32_t tables_creating = 0;
  std::uint64_t tables_creating_bytes = 0;
  Limits limits;
  // Published values (docs/VALUES.md); its budgets are `limits`.
  ValueStore values{limits};
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::unordered_set<Session*> sessions;  // open connections; each Session adds/removes itself
  WaitQueue sessions_drained;             // woken when the last session ends
  // The next connection's id: its writer identity for episodes (Call::writer). Restored
  // open episodes are ended at startup (TableRegistry::end_all_writers), so ids may restart.
  std::uint64_t next_connection_id = 1;
  bool shutting_down = false;
  // Bytes of queued replies and parked payloads of every session (limits.max_buffered_bytes);
  // sessions add and remove theirs (Session::hold / release).
  std::uint64_t buffered_bytes = 0;
  // Bumped for each request handled and each reply write finished: the memory trimmer
  // (service/memory_trimmer.h) trims only after a period without a change.
  std::uint64_t activity = 0;
  // Snapshots of all tables (docs/SNAPSHOT.md); owned by the Server, null in unit tests.
  Snapshotter* snapshots = nullptr;
  // TCP connections must present this token in their first request (hello); empty: none.
  std::string auth_token;
  // Prometheus instruments the request path updates (docs/OPERATIONS.md).
  metrics::ServerMetrics metrics{kServerVersion, metric_op_labels()};
  // Shares the thread between learners and explorers (limits.learner_share).
  Scheduler scheduler;
  // Seeds tables whose description states none (random by default; fixed in tests).
  std::uint64_t (*seed_source)() = nullptr;
  // The shared-memory data plane (config `shared_memory`, docs/SHM.md): where tables get
  // their column blocks (null: private memory, and no plane), and what every connection
  // holds through it (staging arenas, descriptors in replies, blocks it was sent).
  shm::SharedColumnSource* column_memory = nullptr;
  shm::PlaneBudget plane;
  // File tiers (docs/FILE_TIER.md): the directory tables' segments live under (config
  // `tier_dir`; empty: no table may have a file tier) and the pool that does their disk
  // work (owned by the Server; null in unit tests).
  std::string tier_dir;
  IoPool* io_pool = nullptr;
  // Why no table may have a file tier on this server although it has a tier_dir (empty:
  // they may): tier_dir and data_dir on different filesystems.
  std::string file_tier_refusal;
  // Names each table's tier directory uniquely (a table dropped and created again).
  std::uint64_t next_tier_id = 1;
};

}  // namespace replayd::service
