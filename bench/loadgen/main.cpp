// replayd_loadgen: measures a replayd server through the C++ client with explorer and
// learner processes, and this machine's limits in the same run (docs/BENCHMARKS.md).
#include <deque>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <optional>

#include <boost/json/serialize.hpp>

#include "machine_limits.h"
#include "options.h"
#include "replayd_client/client.h"
#include "report.h"
#include "server_process.h"
#include "w3_workers.h"
#include "worker_processes.h"
#include "workload.h"

namespace {

using namespace replayd::loadgen;
namespace client = replayd::client;

constexpr const char* kTable = "loadgen";

// Writes `steps` W3 steps (pre-compressed frames), pipelined, and waits for them.
void prefill_episodes(const std::string& address, std::uint64_t steps) {
  const W3FramePool pool(99, 2048, /*keep_raw=*/false);
  std::cout << "W3 frame pool: zstd level 3 ratio " << pool.compression_ratio() << "x"
            << std::endl;  // flushed: the workers fork after this
  client::EpisodeWriterOptions options;
  options.batch = 64;
  options.max_in_flight = 4;
  client::EpisodeWriter writer(address, kTable, options);
  W3EpisodeStream stream(pool, /*live_compression=*/false, 99);
  for (std::uint64_t i = 0; i < steps; ++i)
    stream.write_step(writer);
  writer.close();
}

// Creates the run's table afresh and inserts `items` random items, pipelined. The client
// (and its reader thread) is gone when this returns, so the caller may fork.
void prepare_table(const std::string& address, const Workload& workload, bool prioritized,
                   std::uint64_t items) {
  client::ClientOptions setup_options;
  setup_options.shared_memory = false;
  client::Client setup(address, setup_options);
  try {
    setup.drop_table(kTable);
  } catch (const client::Error& e) {
    if (e.code() != client::ErrorCode::not_found) throw;
  }
  setup.create_table(table_description(workload, kTable, prioritized));
  if (workload.episodic) {
    setup.close();
    prefill_episodes(address, items);
    return;
  }
  const std::uint64_t chunk = workload.item_bytes > 1000 ? 64 : 1000;
  RandomBatch data(workload, chunk, 99);
  std::deque<std::future<client::Keys>> in_flight;
  for (std::uint64_t done = 0; done < items; done += chunk) {
    if (in_flight.size() >= 4) {
      in_flight.front().get();
      in_flight.pop_front();
    }
    in_flight.push_back(setup.insert_async(kTable, data.batch()));
  }
  for (auto& f : in_flight)
    f.get();
}

int run(LoadgenOptions options) {
  const Workload workload = workload_named(options.workload);
  if (options.sample_batch_items == 0) options.sample_batch_items = workload.default_sample_batch;

  RunReport report;
  if (options.limits_s > 0) {
    report.limits = measure_machine_limits(options.limits_s);
    report.has_limits = true;
  }

  std::unique_ptr<ServerProcess> server;
  std::string address = options.address;
  if (address.empty()) {
    server = std::make_unique<ServerProcess>(
        options.server_path.empty() ? default_server_path() : options.server_path,
        options.transport);
    address = server->address();
  }
  const std::uint64_t prefill = options.prefill_items >= 0
                                    ? static_cast<std::uint64_t>(options.prefill_items)
                                    : workload.capacity_items;
  prepare_table(address, workload, options.prioritized, prefill);

  WorkerPlan plan{address,
                  kTable,
                  workload,
                  options.insert_chunk_items,
                  options.sample_batch_items,
                  options.prioritized,
                  options.depth,
                  options.duration_s,
                  1,
                  options.w3_pool_frames,
                  options.w3_live_compression,
                  options.w3_decode,
                  options.shm};
  const double cpu_before = server ? server->cpu_seconds() : 0;
  const WorkerRun workers = run_worker_processes(plan, options.explorers, options.learners);
  const double cpu_after = server ? server->cpu_seconds() : 0;

  const MachineLimits limits = report.limits;
  const bool has_limits = report.has_limits;
  report = summarize(options, workload, workers);
  report.limits = limits;
  report.has_limits = has_limits;
  report.server_address = address;
  if (server) report.server_cpu_s = cpu_after - cpu_before;

  print_table(std::cout, report);
  if (!options.json_path.empty()) {
    std::ofstream out(options.json_path);
    out << boost::json::serialize(to_json(report)) << "\n";
    if (!out) {
      std::cerr << "replayd_loadgen: cannot write " << options.json_path << "\n";
      return 1;
    }
  }
  return (report.errors || report.failed_workers) ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  auto options = parse_options(argc, argv, exit_code);
  if (!options) return exit_code;
  try {
    return run(*options);
  } catch (const std::exception& e) {
    std::cerr << "replayd_loadgen: " << e.what() << "\n";
    return 1;
  }
}
