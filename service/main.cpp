// replayd: the replay-buffer server. Parses flags (CLI11) and the config file, opens the
// listeners, writes the ready file, and serves until SIGINT/SIGTERM.
#include <malloc.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "service/config.h"
#include "service/health_probe.h"
#include "service/protocol_description.h"
#include "service/server.h"

namespace {

using replayd::service::ServerConfig;

// Exit codes (docs/OPERATIONS.md): 0 clean stop, 1 failed to start or fatal error, 2 bad
// configuration, 3 stopped but the final snapshot failed (recent changes are lost).
constexpr int kExitFinalSnapshotFailed = 3;

// Request payloads and sample replies are large transient buffers (a W2 sample of 32 items
// is 1.8 MB), allocated and freed per request. glibc would map such blocks with mmap, or
// trim them off the heap once freed, so every request paid page faults on fresh memory (W2
// sampling ran 5-8x slower, docs/BENCHMARKS.md). Keep them in the heap for reuse: blocks
// below 32 MiB come from the heap, and up to 128 MiB of free heap is kept, not returned.
void keep_large_buffers_in_heap() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
}

// Writes `content` to `path` atomically (temporary file, then rename).
bool write_file_atomically(const std::string& path, const std::string& content) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!(out << content)) return false;
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  return !ec;
}

std::string ready_document(const replayd::service::ListenAddresses& addresses) {
  boost::json::object ready{{"pid", ::getpid()}};
  if (!addresses.unix_path.empty()) ready["unix"] = addresses.unix_path;
  if (!addresses.tcp.empty()) ready["tcp"] = addresses.tcp;
  if (!addresses.metrics.empty()) ready["metrics"] = addresses.metrics;
  return boost::json::serialize(ready) + "\n";
}

}  // namespace

int main(int argc, char** argv) {
  keep_large_buffers_in_heap();
  CLI::App app{"replayd: a replay-buffer server for reinforcement learning"};
  std::string config_path;
  std::optional<std::string> unix_path;
  std::optional<std::string> tcp_address;
  std::optional<std::string> metrics_address;
  std::optional<std::string> log_level;
  std::optional<std::string> ready_file;
  std::optional<std::string> data_dir;
  std::optional<std::string> tier_dir;
  std::uint32_t snapshot_test_pause_ms = 0;
  std::optional<std::string> probe_url;
  bool check_config = false;
  bool describe_protocol = false;
  bool insecure = false;
  bool allow_empty_start = false;
  std::optional<bool> shared_memory;
  std::optional<std::uint32_t> busy_poll_us;
  app.add_option("--config", config_path, "JSON config file (docs/CONFIG.md)")
      ->check(CLI::ExistingFile);
  app.add_option("--unix", unix_path,
                 "Unix socket path; \"\" disables (default /tmp/replayd.sock)");
  app.add_option("--tcp", tcp_address,
                 "TCP HOST:PORT, port 0 = any; \"\" disables (default 127.0.0.1:7700)");
  app.add_option(
      "--metrics", metrics_address,
      "HTTP HOST:PORT for /metrics, /healthz, /readyz; \"\" disables (default 127.0.0.1:9700)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off");
  app.add_option("--ready-file", ready_file,
                 "write {\"unix\",\"tcp\",\"metrics\",\"pid\"} JSON here once listening");
  app.add_flag("--insecure", insecure,
               "allow a non-loopback TCP address without a token (docs/SECURITY.md)");
  app.add_option("--data-dir", data_dir,
                 "snapshot directory (docs/SNAPSHOT.md); \"\" disables snapshots (default: none)");
  app.add_option("--tier-dir", tier_dir,
                 "directory on a local disk where tables with a file tier keep the rows past "
                 "their RAM budget (docs/FILE_TIER.md; default: none, no file tiers)");
  app.add_flag("--allow-empty-start", allow_empty_start,
               "start with empty tables when data_dir holds snapshots of which none can be "
               "restored (they are all kept); without it such a start fails");
  app.add_option("--shared-memory", shared_memory,
                 "true or false: tables' columns in shared memory, offered to Unix clients of "
                 "this uid (docs/SHM.md; default true)");
  app.add_option("--busy-poll-us", busy_poll_us,
                 "microseconds the server's thread keeps polling for requests before it sleeps, "
                 "0 - 100000 (docs/OPERATIONS.md, Busy polling; default 0: it sleeps at once)")
      ->check(CLI::Range(0u, replayd::service::kMaxBusyPollUs));
  app.add_option("--snapshot-test-pause-ms", snapshot_test_pause_ms,
                 "TEST ONLY: each snapshot write pauses this long after its header")
      ->group("");
  app.add_option("--probe", probe_url,
                 "GET this URL of a running server (e.g. http://127.0.0.1:9700/healthz); exit 0 "
                 "if it answers 200, 1 otherwise (a health check without curl)");
  app.add_flag("--check-config", check_config,
               "validate the config file and flags, then exit 0 (valid) or 2 (the error)");
  app.add_flag("--describe-protocol", describe_protocol,
               "print the protocol's operations, error codes and dtypes as JSON, then exit 0");
  app.set_version_flag("--version", std::string("replayd ") + replayd::service::kServerVersion);
  CLI11_PARSE(app, argc, argv);

  if (describe_protocol) {
    std::cout << replayd::service::describe_protocol() << "\n";
    return 0;
  }
  if (probe_url) {
    const auto result = replayd::service::probe_http(*probe_url, std::chrono::seconds(3));
    std::cout << *probe_url << ": " << result.detail << "\n";
    return result.healthy ? 0 : 1;
  }

  try {
    ServerConfig config;
    if (!config_path.empty()) {
      std::ifstream in(config_path);
      std::stringstream text;
      text << in.rdbuf();
      auto parsed =
          replayd::service::parse_server_config(text.str(), &replayd::service::random_seed);
      if (!parsed) {
        std::cerr << "replayd: " << config_path << ": " << parsed.error().message << "\n";
        return 2;
      }
      config = std::move(parsed).value();
    }
    if (unix_path) config.unix_path = *unix_path;
    if (tcp_address) config.tcp_address = *tcp_address;
    if (metrics_address) config.metrics_address = *metrics_address;
    if (log_level) config.log_level = *log_level;
    if (ready_file) config.ready_file = *ready_file;
    if (data_dir) config.data_dir = *data_dir;
    if (tier_dir) config.tier_dir = *tier_dir;
    config.snapshot_test_pause_ms = snapshot_test_pause_ms;
    if (insecure) config.insecure = true;
    if (allow_empty_start) config.allow_empty_start = true;
    if (shared_memory) config.shared_memory = *shared_memory;
    if (busy_poll_us) config.busy_poll_us = *busy_poll_us;
    // The environment wins over the file, so a deployment can inject the secret without
    // writing it into the config; there is no flag (command lines are visible to every user).
    if (const char* token = std::getenv("REPLAYD_TOKEN"); token && *token) {
      if (auto problem = replayd::service::token_problem(token)) {
        std::cerr << "replayd: REPLAYD_TOKEN: " << *problem << "\n";
        return 2;
      }
      config.auth_token = token;
    }

    const auto level = spdlog::level::from_str(config.log_level);
    if (level == spdlog::level::off && config.log_level != "off") {
      std::cerr << "replayd: --log-level: unknown level '" << config.log_level << "'\n";
      return 2;
    }
    spdlog::set_level(level);
    if (check_config) {
      std::cout << "replayd: configuration valid: " << config.tables.size() << " tables\n";
      return 0;
    }

    replayd::service::Server server(config);
    if (auto status = server.open(); !status) {
      std::cerr << "replayd: " << status.error().message << "\n";
      return 1;
    }
    server.handle_signals();
    if (!config.ready_file.empty()) {
      if (!write_file_atomically(config.ready_file, ready_document(server.addresses()))) {
        std::cerr << "replayd: cannot write ready file '" << config.ready_file << "'\n";
        return 1;
      }
    }
    spdlog::info("replayd {} serving {} tables", replayd::service::kServerVersion,
                 server.context().tables.size());
    if (auto final_snapshot = server.run(); !final_snapshot) {
      spdlog::critical(
          "replayd stopped WITHOUT its final snapshot ({}): changes acknowledged since the last "
          "snapshot are not saved; exit code {}",
          final_snapshot.error().message, kExitFinalSnapshotFailed);
      return kExitFinalSnapshotFailed;
    }
    spdlog::info("replayd stopped");
    return 0;
  } catch (const std::exception& e) {
    spdlog::critical("fatal: {}", e.what());
    return 1;
  }
}
