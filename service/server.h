// Server: one io_context on one thread owning every table, the listeners and the sessions.
// open() loads the configured tables and binds the listeners (errors name the problem and
// nothing is served); run() serves on the calling thread until stop.
// Cross-thread use: request_stop() and ready() may be called from any thread; everything
// else belongs to the thread that calls run().
#pragma once

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/signal_set.hpp>
#include <future>
#include <optional>
#include <string>

#include "service/config.h"
#include "service/metrics_endpoint.h"
#include "service/service_context.h"
#include "service/snapshot/snapshotter.h"
#include "service/tier/io_pool.h"

namespace replayd::service {

struct ListenAddresses {
  std::string unix_path;  // empty when disabled
  std::string tcp;        // "host:port" with the bound port; empty when disabled
  std::string metrics;    // "host:port" of the metrics HTTP listener; empty when disabled
};

class Server {
 public:
  // Deadline for sessions to flush their replies after a stop request.
  static constexpr std::chrono::seconds kShutdownGrace{5};

  explicit Server(ServerConfig config);
  ~Server();

  // Creates the configured tables (restoring them from the newest usable snapshot when
  // data_dir is set; docs/SNAPSHOT.md) and binds the listeners. On error nothing is listening.
  Status open();
  // Stops on SIGINT/SIGTERM as well as on request_stop().
  void handle_signals();
  // Serves until stopped: stop accepting, answer waiting requests shutting_down, flush
  // replies, close. Returns when every session has ended (or after kShutdownGrace) and,
  // with data_dir set, the final snapshot is written. Returns that snapshot's status: an
  // error (resource_exhausted naming the failed step) means changes acknowledged since the
  // last snapshot are lost, and the process must not exit 0. Ok without data_dir.
  Status run();
  // Thread-safe; posts the stop to the io_context.
  void request_stop();
  // Ready once open() succeeded and run() started. Thread-safe.
  std::shared_future<ListenAddresses> ready() const { return ready_future_; }
  const ListenAddresses& addresses() const { return addresses_; }
  ServiceContext& context() { return context_; }

 private:
  void stop();
  Status open_unix();
  Status open_tcp();
  Status open_metrics();
  // Holds tier_dir for this process (service/tier/tier_setup.h) and says whether file tiers
  // can be kept in this server's snapshots.
  Status claim_tier_dir_for_serving();

  ServerConfig config_;
  // Disk work of file tiers. Shut down (its jobs run, its threads joined) in ~Server before
  // the tables go; declared before io_ so that it outlives the coroutines io_ destroys (a
  // file tier's writer holds its table, whose FileTier hands its directory to the pool).
  std::unique_ptr<IoPool> io_pool_;
  asio::io_context io_;
  // Where tables' column blocks come from when shared_memory is on (they do not refer back
  // to it: any order of destruction is safe).
  std::unique_ptr<shm::SharedColumnSource> column_source_;
  ServiceContext context_;
  std::unique_ptr<Snapshotter> snapshotter_;  // always present; enabled() when data_dir is set
  std::optional<asio::local::stream_protocol::acceptor> unix_acceptor_;
  std::optional<asio::ip::tcp::acceptor> tcp_acceptor_;
  std::optional<asio::signal_set> signals_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;  // null when metrics are disabled
  bool serving_ = false;                               // run() started the listeners
  ListenAddresses addresses_;
  std::promise<ListenAddresses> ready_promise_;
  std::shared_future<ListenAddresses> ready_future_;
  bool stopping_ = false;
  int tier_lock_fd_ = -1;  // the lock on tier_dir (claim_tier_dir); -1: none
};

// A seed from std::random_device, for tables whose description states none.
std::uint64_t random_seed();

}  // namespace replayd::service
