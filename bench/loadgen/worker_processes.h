// Runs explorers and learners as separate processes (fork, then each child makes its own
// Client), starts them together once all are connected, and collects their WorkerResults
// through pipes. Call it from a process with no other threads (fork copies only the caller).
#pragma once

#include <cstdint>
#include <vector>

#include "workers.h"

namespace replayd::loadgen {

struct WorkerRun {
  std::vector<WorkerResult> explorers;
  std::vector<WorkerResult> learners;
  std::uint64_t failed_workers = 0;  // children that exited without a result
};

// Forks `explorers` + `learners` children running `plan` (each with its own seed), waits
// until every child is connected, releases them at once and returns their results after
// they exit. A child that fails to connect or crashes counts in failed_workers. Blocks for
// about plan.duration_s plus connection setup.
WorkerRun run_worker_processes(const WorkerPlan& plan, std::uint32_t explorers,
                               std::uint32_t learners);

}  // namespace replayd::loadgen
