#include "options.h"

#include <CLI/CLI.hpp>
#include <map>

namespace replayd::loadgen {

std::optional<LoadgenOptions> parse_options(int argc, char** argv, int& exit_code) {
  LoadgenOptions options;
  CLI::App app{
      "replayd_loadgen: drives a replayd server through the C++ client and reports "
      "throughput, latency and this machine's limits (docs/BENCHMARKS.md)"};
  const std::map<std::string, Transport> transports{{"unix", Transport::unix_socket},
                                                    {"tcp", Transport::tcp}};
  app.add_option("--transport", options.transport,
                 "unix or tcp, for a started server (default unix)")
      ->transform(CLI::CheckedTransformer(transports, CLI::ignore_case));
  app.add_option(
      "--address", options.address,
      "address of a running server (unix:///path or tcp://host:port); default: start one");
  app.add_option("--server", options.server_path,
                 "server binary to start on a temporary socket (default ../../service/replayd next "
                 "to this program)");
  app.add_option("-E,--explorers", options.explorers, "inserting processes (default 1)");
  app.add_option("-L,--learners", options.learners, "sampling processes (default 0)");
  app.add_option("-W,--workload", options.workload, "W1, W2 or W3 (default W1)")
      ->check(CLI::IsMember({"W1", "W2", "W3"}));
  app.add_option("--w3-pool", options.w3_pool_frames,
                 "W3: frames in each explorer's pool, compressed once at start (default 2048)")
      ->check(CLI::Range(std::size_t{16}, std::size_t{1} << 20));
  app.add_flag("--w3-live-compression", options.w3_live_compression,
               "W3: explorers compress each frame as they append it (default: pre-compressed)");
  app.add_flag("--shm", options.shm,
               "W1/W2: explorers stage rows and learners gather them over the shared-memory "
               "plane (Unix socket only)");
  app.add_flag("--w3-decode", options.w3_decode,
               "W3: learners decode and decompress every reply (default: count replies only)");
  app.add_option("--insert-chunk", options.insert_chunk_items, "items per insert call (default 64)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{65536}));
  app.add_option("--sample-batch", options.sample_batch_items,
                 "items per sample call (default: W1 256, W2 32)")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{65536}));
  app.add_flag("--prioritized", options.prioritized,
               "prioritized sampler; learners update the priorities of every sampled key");
  app.add_option("--depth", options.depth, "requests in flight per worker and op (default 8)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--duration", options.duration_s, "measured seconds (default 3)")
      ->check(CLI::PositiveNumber);
  app.add_option("--prefill", options.prefill_items,
                 "items inserted before measuring (default: the table's capacity)");
  app.add_option("--limits-seconds", options.limits_s,
                 "seconds per machine-limit probe; 0 skips them (default 0.5)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--json", options.json_path, "write the report as JSON to this file");
  app.add_option("--label", options.label, "name of this run in the reports");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
    return std::nullopt;
  }
  if (options.explorers + options.learners == 0) {
    std::cerr << "replayd_loadgen: --explorers and --learners are both 0: nothing to measure\n";
    exit_code = 2;
    return std::nullopt;
  }
  return options;
}

}  // namespace replayd::loadgen
