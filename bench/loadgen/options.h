// LoadgenOptions: what one replayd_loadgen run does (workload, workers, batch sizes,
// pipelining, duration) and where the server is, parsed from the command line with CLI11.
// Plain data, no state; parse_options is called once by main.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace replayd::loadgen {

enum class Transport { unix_socket, tcp };

struct LoadgenOptions {
  Transport transport = Transport::unix_socket;
  // "unix:///path" or "tcp://host:port" of a running server; empty: start --server.
  std::string address;
  // The server binary to start on a temporary socket; empty: ../../service/replayd next
  // to this executable.
  std::string server_path;
  std::uint32_t explorers = 1;            // inserting processes
  std::uint32_t learners = 0;             // sampling processes
  std::string workload = "W1";            // W1, W2 or W3 (workload.h)
  std::uint64_t insert_chunk_items = 64;  // items per insert call
  std::uint64_t sample_batch_items = 0;   // items per sample call; 0: the workload's default
  bool prioritized = false;  // prioritized sampler; learners then update sampled priorities
  std::uint32_t depth = 8;   // requests in flight per worker (per op kind)
  double duration_s = 3.0;   // measured time per run, seconds
  // Items inserted before the measurement; -1: the table's capacity, so that inserts evict
  // and write pages already touched (steady state, not the first fill of fresh memory).
  std::int64_t prefill_items = -1;
  double limits_s = 0.5;  // time per machine-limit probe, seconds; 0 skips the probes
  std::string json_path;  // write the JSON report here; empty: none
  std::string label;      // a name for this run in the reports
  // W3 (w3_workers.h): frames per explorer pool; live compression; decoding learners.
  std::size_t w3_pool_frames = 2048;
  bool w3_live_compression = false;
  bool w3_decode = false;
  // W1/W2 over the shared-memory plane (docs/SHM.md, shm_workers.h): explorers stage their
  // rows, learners gather rows from the table's mapping. Unix socket only.
  bool shm = false;
};

// Parses argv. Returns the options, or nullopt after CLI11 printed help or an error; `exit_code`
// then holds what main should return.
std::optional<LoadgenOptions> parse_options(int argc, char** argv, int& exit_code);

}  // namespace replayd::loadgen
