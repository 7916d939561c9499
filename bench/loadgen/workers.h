// Explorer and learner loops: each owns one Client (its own connection) and keeps `depth`
// requests of each kind in flight, timing each from send to reply. They run inside a worker
// process (worker_processes.h) and return a trivially copyable WorkerResult.
// Threading: one worker per process, on its main thread (plus the Client's reader thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "latency_histogram.h"
#include "replayd_client/client.h"
#include "workload.h"

namespace replayd::loadgen {

struct OpTotals {
  std::uint64_t calls = 0;
  std::uint64_t items = 0;
  LatencyHistogram latency;
};

struct WorkerResult {
  OpTotals insert;
  OpTotals sample;
  OpTotals update;
  double elapsed_s = 0;      // first request sent to last reply received
  std::uint64_t errors = 0;  // requests that failed (the first message goes to stderr)
};

struct WorkerPlan {
  std::string address;
  std::string table;
  Workload workload;
  std::uint64_t insert_chunk_items = 64;
  std::uint64_t sample_batch_items = 256;
  bool update_priorities = false;
  std::uint32_t depth = 8;
  double duration_s = 1;
  std::uint64_t seed = 1;
  // W3 only (w3_workers.h): frames in each explorer's pool, explorers compressing each
  // frame as they append it instead of sending the pool's pre-compressed frames, and
  // learners decoding (decompressing) each reply instead of counting it.
  std::size_t w3_pool_frames = 2048;
  bool w3_live_compression = false;
  bool w3_decode = false;
  bool shm = false;  // W1/W2 over the shared-memory plane (shm_workers.h)
};

// A worker's client: room for its requests in flight, its name in the server's log, and
// the shared-memory plane asked for only with plan.shm (the socket rows ask for nothing the
// servers before the plane would refuse: scripts/bench-ab).
client::ClientOptions client_options(const WorkerPlan& plan, const char* name);

// Connects (before `wait_for_start` returns), then inserts insert_chunk_items per call for
// duration_s with `depth` calls in flight. Throws client::Error if it cannot connect.
WorkerResult run_explorer(const WorkerPlan& plan, void (*wait_for_start)(void*), void* context);

// Connects, then samples sample_batch_items per call for duration_s with `depth` calls in
// flight; with update_priorities, sends random new priorities for every sampled key (also
// up to `depth` in flight). Throws client::Error if it cannot connect.
WorkerResult run_learner(const WorkerPlan& plan, void (*wait_for_start)(void*), void* context);

}  // namespace replayd::loadgen
