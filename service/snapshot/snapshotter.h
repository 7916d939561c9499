// Snapshotter: writes snapshots of every table without stopping the server
// (docs/SNAPSHOT.md). A run fork()s: the child writes the copy-on-write image of all tables
// to the data directory and _exit()s; the parent is stalled only for fork() (page-table
// copy) and learns the outcome through a pipe watched on the io_context. Requests that
// arrive while a run is in progress are served by the next run, which starts when the
// current one ends (so a reply always covers everything acknowledged before its request).
// Also: periodic snapshots (snapshot_interval_s) and the final, in-process snapshot at
// shutdown. Owned by the Server. Threading: io_context thread only, except write_final(),
// which runs after the io_context stopped.
#pragma once

#include <sys/types.h>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "core/snapshot/table_snapshot.h"
#include "service/snapshot/snapshot_files.h"
#include "service/snapshot/snapshot_gate.h"
#include "service/table_registry.h"
#include "service/values/value_store.h"
#include "service/waiting/wait_queue.h"

namespace replayd::service {

struct SnapshotOptions {
  std::string data_dir;             // empty: snapshots disabled
  std::uint32_t interval_s = 0;     // seconds between periodic snapshots; 0: none
  std::uint32_t keep = 3;           // complete snapshots kept in data_dir, >= 1
  std::uint32_t test_pause_ms = 0;  // test-only: each write pauses this long after its header
  // Called on the io_context thread when a snapshot was written (the metrics count it).
  std::function<void(const SnapshotStats&)> on_written;
};

struct SnapshotOutcome {
  Status status = Ok{};  // resource_exhausted names the failed step (disk full, ...)
  std::string path;      // the file written
  SnapshotStats stats;
  double duration_ms = 0;  // from the start of the run to the file being durable
  double stall_ms = 0;     // how long fork() blocked the io_context thread
};

class Snapshotter {
 public:
  // `values`: the published values written with the tables (null: none).
  Snapshotter(asio::io_context& io, const TableRegistry& tables, SnapshotOptions options,
              const ValueStore* values = nullptr);
  ~Snapshotter();
  Snapshotter(const Snapshotter&) = delete;
  Snapshotter& operator=(const Snapshotter&) = delete;

  bool enabled() const { return !options_.data_dir.empty(); }
  // Open while no snapshot is being written (file tiers hold back deleting segments).
  const std::shared_ptr<SnapshotGate>& gate() const { return gate_; }
  const SnapshotOptions& options() const { return options_; }
  // New snapshots get sequence numbers above `sequence` (the newest file found at start).
  // Snapshots up to `kept_through` are never pruned (RestoreOutcome::kept_through).
  void set_newest_sequence(std::uint64_t sequence, std::uint64_t kept_through = 0) {
    next_sequence_ = sequence + 1;
    kept_through_ = kept_through;
  }

  // Starts the periodic snapshots, if configured.
  void start();
  // Asks for a snapshot covering every change made before this call; returns the run that
  // will hold it (started now when idle, else queued behind the running one). Never
  // suspends; the run's outcome() appears later (or at once if it could not even start).
  std::uint64_t request();
  // The outcome of `run`, or nullptr while it is queued or running (also for runs too old to
  // be remembered, of which the last 16 are).
  const SnapshotOutcome* outcome(std::uint64_t run) const;
  // Woken (wake_all) whenever a run ends; cancelled with shutting_down by stop().
  WaitQueue& finished() { return finished_; }

  // Server stopping: no more periodic runs; waiters are cancelled with shutting_down.
  void stop();
  // After the io_context stopped: ends a running child (its partial file is removed) and
  // writes the final snapshot in this process. Blocks for the whole write. Logs the outcome.
  SnapshotOutcome write_final();

 private:
  void start_run(std::uint64_t run);
  void finish_run(std::uint64_t run, SnapshotOutcome outcome);
  asio::awaitable<void> watch_child(pid_t pid, int pipe_fd, std::uint64_t run,
                                    std::chrono::steady_clock::time_point started, double stall_ms);
  asio::awaitable<void> periodic();
  [[noreturn]] void child_main(int pipe_fd, std::uint64_t sequence, pid_t parent);
  Result<WrittenSnapshot> write_now(std::uint64_t sequence) const;

  asio::io_context& io_;
  const TableRegistry& tables_;
  const ValueStore* values_ = nullptr;
  SnapshotOptions options_;
  asio::steady_timer timer_;
  WaitQueue finished_;
  std::uint64_t next_sequence_ = 1;
  std::uint64_t kept_through_ = 0;  // snapshots up to this sequence are never pruned
  std::uint64_t last_run_ = 0;
  std::uint64_t running_run_ = 0;  // 0: none
  std::uint64_t queued_run_ = 0;   // 0: none
  pid_t child_pid_ = 0;
  bool stopped_ = false;
  std::deque<std::pair<std::uint64_t, SnapshotOutcome>> outcomes_;  // the last 16
  std::shared_ptr<SnapshotGate> gate_ = std::make_shared<SnapshotGate>();
};

}  // namespace replayd::service
