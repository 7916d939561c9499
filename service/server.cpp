#include "service/server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <asio/co_spawn.hpp>
#include <asio/post.hpp>
#include <cerrno>
#include <filesystem>
#include <random>

#include "service/descriptor_limit.h"
#include "service/memory_trimmer.h"
#include "service/net/listener.h"
#include "service/net/session.h"
#include "service/owner_loop.h"
#include "service/snapshot/segment_links.h"
#include "service/snapshot/snapshot_files.h"
#include "service/snapshot/snapshot_restore.h"
#include "service/tier/tier_setup.h"
#include "service/values/policy_versions.h"
#include "service/waiting/off_thread.h"

namespace replayd::service {
namespace {

void log_listener_exit(std::exception_ptr error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    spdlog::critical("listener failed: {}", e.what());
  }
}

}  // namespace

std::uint64_t random_seed() {
  std::random_device device;
  return (std::uint64_t{device()} << 32) ^ device();
}

// Threads that write file tiers' rows out and read cold rows back.
constexpr std::size_t kIoPoolThreads = 2;

Server::Server(ServerConfig config) : config_(std::move(config)) {
  context_.limits = config_.limits;
  context_.scheduler.set_learner_share(config_.limits.learner_share);
  context_.auth_token = config_.auth_token;
  context_.seed_source = &random_seed;
  if (config_.shared_memory) {
    column_source_ = std::make_unique<shm::SharedColumnSource>();
    context_.column_memory = column_source_.get();
    context_.values.use_shared_memory(true);
  }
  context_.plane.max_staging_bytes = config_.limits.max_staging_bytes;
  context_.plane.max_arenas = config_.limits.max_staging_arenas;
  context_.plane.max_queued_descriptors = config_.limits.max_queued_descriptors;
  for (std::string_view code : wire_error_codes())
    context_.metrics.declare_error_code(code);
  ready_future_ = ready_promise_.get_future().share();
  snapshotter_ = std::make_unique<Snapshotter>(
      io_, context_.tables,
      SnapshotOptions{config_.data_dir, config_.snapshot_interval_s, config_.snapshot_keep,
                      config_.snapshot_test_pause_ms,
                      [this](const SnapshotStats& stats) {
                        context_.metrics.snapshot_written(stats.items, stats.items_dropped);
                      }},
      &context_.values);
  context_.snapshots = snapshotter_.get();
  if (!config_.tier_dir.empty()) {
    io_pool_ = std::make_unique<IoPool>(kIoPoolThreads);
    context_.tier_dir = config_.tier_dir;
    context_.io_pool = io_pool_.get();
  }
}

Server::~Server() {
  wait_for_off_thread_work();          // tables being created post into io_: it must outlive them
  if (io_pool_) io_pool_->shutdown();  // its jobs read tables' cells: before the tables go
  if (tier_lock_fd_ >= 0) ::close(tier_lock_fd_);
  if (unix_acceptor_ && !addresses_.unix_path.empty()) {
    std::error_code ignored;
    std::filesystem::remove(addresses_.unix_path, ignored);
  }
}

Status Server::open() {
  raise_descriptor_limit(context_.limits);
  if (snapshotter_->enabled()) REPLAYD_RETURN_IF_ERROR(ensure_snapshot_dir(config_.data_dir));
  if (!config_.tier_dir.empty()) REPLAYD_RETURN_IF_ERROR(claim_tier_dir_for_serving());
  for (const auto& table_config : config_.tables)
    REPLAYD_RETURN_IF_ERROR(check_file_tier_allowed(context_, table_config));
  if (snapshotter_->enabled()) {
    REPLAYD_ASSIGN_OR_RETURN(
        RestoreOutcome restored,
        restore_tables(config_.data_dir, config_.tables, context_.limits, config_.allow_empty_start,
                       context_.tables, context_.column_memory, &context_.values));
    snapshotter_->set_newest_sequence(restored.newest_sequence, restored.kept_through);
    context_.tables.end_all_writers();
    // Before the temporaries go: a restored file tier links the segments kept beside its
    // snapshot (and a leftover of an interrupted run is not among them).
    for (const auto& hosted : context_.tables.list()) {
      if (!hosted->table->config().file_tier.enabled()) continue;
      REPLAYD_RETURN_IF_ERROR(check_file_tier_allowed(context_, hosted->table->config()));
      REPLAYD_RETURN_IF_ERROR(
          restore_file_tier(context_, *hosted, restored.snapshot_path, io_.get_executor()));
      table_changed(*hosted);  // rows past the budget are written out once serving
    }
    remove_snapshot_temporaries(config_.data_dir);
  } else {
    for (const auto& table_config : config_.tables) {
      const bool tiered = table_config.file_tier.enabled();
      auto table = Table::create(table_config, context_.limits.max_table_bytes,
                                 tiered ? nullptr : context_.column_memory);
      if (!table) return table.error();
      auto hosted = context_.tables.add(std::move(table).value());
      if (tiered) {  // before serving: the directory may be made on this thread
        REPLAYD_ASSIGN_OR_RETURN(
            std::string dir,
            make_tier_dir(context_.tier_dir, table_config.name, context_.next_tier_id++));
        attach_file_tier(context_, *hosted, std::move(dir), io_.get_executor());
      }
    }
  }
  for (const auto& hosted : context_.tables.list())
    adopt_policy_version(context_, *hosted);
  if (!config_.unix_path.empty()) REPLAYD_RETURN_IF_ERROR(open_unix());
  if (!config_.tcp_address.empty()) REPLAYD_RETURN_IF_ERROR(open_tcp());
  if (!unix_acceptor_ && !tcp_acceptor_) {
    return make_error(ErrorCode::invalid_argument, "no listener: both unix and tcp are disabled");
  }
  if (!config_.metrics_address.empty()) REPLAYD_RETURN_IF_ERROR(open_metrics());
  return Ok{};
}

Status Server::claim_tier_dir_for_serving() {
  REPLAYD_ASSIGN_OR_RETURN(tier_lock_fd_, claim_tier_dir(config_.tier_dir));
  if (!snapshotter_->enabled()) return Ok{};
  REPLAYD_ASSIGN_OR_RETURN(bool shared, same_filesystem(config_.tier_dir, config_.data_dir));
  if (!shared) {
    context_.file_tier_refusal =
        "tier_dir '" + config_.tier_dir + "' and data_dir '" + config_.data_dir +
        "' are on different filesystems, and snapshots keep a file tier's segments as hard "
        "links, which cannot cross filesystems: put tier_dir on data_dir's filesystem";
  }
  return Ok{};
}

Status Server::open_metrics() {
  auto endpoint = MetricsEndpoint::open(io_, config_.metrics_address, context_, [this] {
    if (context_.shutting_down) return std::string("shutting down");
    return std::string(serving_ ? "" : "starting");
  });
  if (!endpoint) return endpoint.error();
  metrics_endpoint_ = std::move(endpoint).value();
  addresses_.metrics = metrics_endpoint_->address();
  return Ok{};
}

Status Server::open_unix() {
  const std::string& path = config_.unix_path;
  struct stat info {};
  if (::lstat(path.c_str(), &info) == 0) {
    if (!S_ISSOCK(info.st_mode)) {
      return make_error(ErrorCode::invalid_argument,
                        "unix socket path '" + path + "' exists and is not a socket");
    }
    // A live server on this path accepts a connection; a stale socket file refuses it.
    asio::local::stream_protocol::socket probe(io_);
    asio::error_code ec;
    probe.connect(asio::local::stream_protocol::endpoint(path), ec);
    if (!ec) {
      return make_error(ErrorCode::invalid_argument,
                        "unix socket '" + path + "' is in use by another server");
    }
    ::unlink(path.c_str());
  }
  asio::error_code ec;
  asio::local::stream_protocol::acceptor acceptor(io_);
  acceptor.open(asio::local::stream_protocol(), ec);
  if (!ec) {
    // The socket file is created owner-only (umask) and then given unix_mode, so it is never
    // more open than configured. open() runs before any other thread exists.
    const mode_t previous_umask = ::umask(0177);
    acceptor.bind(asio::local::stream_protocol::endpoint(path), ec);
    ::umask(previous_umask);
  }
  if (!ec && ::chmod(path.c_str(), static_cast<mode_t>(config_.unix_mode)) != 0) {
    ec = asio::error_code(errno, asio::error::get_system_category());
  }
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return make_error(ErrorCode::invalid_argument,
                      "cannot listen on unix socket '" + path + "': " + ec.message());
  }
  unix_acceptor_.emplace(std::move(acceptor));
  addresses_.unix_path = path;
  return Ok{};
}

Status Server::open_tcp() {
  auto host_port = parse_host_port(config_.tcp_address);
  if (!host_port) return host_port.error();
  asio::error_code ec;
  const auto address = asio::ip::make_address(host_port->host, ec);
  if (ec) {
    return make_error(ErrorCode::invalid_argument, "tcp address '" + config_.tcp_address + "': '" +
                                                       host_port->host + "' is not an IP address");
  }
  if (!address.is_loopback() && config_.auth_token.empty() && !config_.insecure) {
    return make_error(
        ErrorCode::invalid_argument,
        "refusing to listen on tcp " + config_.tcp_address +
            " (not a loopback address) without a token: set auth.token or "
            "REPLAYD_TOKEN, or pass --insecure to accept any client that can reach it");
  }
  const asio::ip::tcp::endpoint endpoint(address, host_port->port);
  asio::ip::tcp::acceptor acceptor(io_);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return make_error(ErrorCode::invalid_argument,
                      "cannot listen on tcp " + config_.tcp_address + ": " + ec.message());
  }
  const auto bound = acceptor.local_endpoint();
  addresses_.tcp = (bound.address().is_v6() ? "[" + bound.address().to_string() + "]"
                                            : bound.address().to_string()) +
                   ":" + std::to_string(bound.port());
  tcp_acceptor_.emplace(std::move(acceptor));
  return Ok{};
}

void Server::handle_signals() {
  signals_.emplace(io_, SIGINT, SIGTERM);
  signals_->async_wait([this](const asio::error_code& ec, int signal) {
    if (ec) return;
    spdlog::info("received signal {}, shutting down", signal);
    stop();
  });
}

Status Server::run() {
  if (unix_acceptor_) {
    asio::co_spawn(io_, accept_unix(*unix_acceptor_, context_), log_listener_exit);
    spdlog::info("listening on unix:{}", addresses_.unix_path);
  }
  if (tcp_acceptor_) {
    asio::co_spawn(io_, accept_tcp(*tcp_acceptor_, context_), log_listener_exit);
    spdlog::info("listening on tcp:{}", addresses_.tcp);
  }
  if (metrics_endpoint_) {
    metrics_endpoint_->start();
    spdlog::info("serving metrics on http://{}/metrics", addresses_.metrics);
  }
  asio::co_spawn(io_, trim_memory_when_idle(context_, MemoryTrimPolicy{}), log_listener_exit);
  serving_ = true;
  snapshotter_->start();
  ready_promise_.set_value(addresses_);
  run_owner_loop(io_, std::chrono::microseconds(config_.busy_poll_us),
                 [this](std::chrono::nanoseconds idle) { context_.metrics.busy_polled(idle); });
  return snapshotter_->write_final().status;
}

void Server::request_stop() {
  asio::post(io_, [this] { stop(); });
}

void Server::stop() {
  if (stopping_) return;
  stopping_ = true;
  context_.shutting_down = true;
  asio::error_code ignored;
  if (unix_acceptor_) unix_acceptor_->close(ignored);
  if (tcp_acceptor_) tcp_acceptor_->close(ignored);
  if (signals_) signals_->cancel(ignored);
  context_.tables.cancel_all_waiters(CancelReason::shutting_down);
  context_.values.cancel_all(CancelReason::shutting_down);
  context_.scheduler.cancel_all();
  snapshotter_->stop();
  for (Session* session :
       std::vector<Session*>(context_.sessions.begin(), context_.sessions.end())) {
    session->begin_shutdown();
  }
  // Give sessions kShutdownGrace to flush; then stop regardless.
  asio::co_spawn(
      io_,
      [this]() -> asio::awaitable<void> {
        auto executor = co_await asio::this_coro::executor;
        if (!context_.sessions.empty()) {
          WaitQueue::Waiter waiter(context_.sessions_drained, executor);
          co_await waiter.wait(std::chrono::steady_clock::now() + kShutdownGrace);
        }
        if (!context_.sessions.empty()) {
          spdlog::warn("{} connections did not finish within {} s; closing them",
                       context_.sessions.size(), kShutdownGrace.count());
        }
        if (metrics_endpoint_) metrics_endpoint_->close();
        io_.stop();
      },
      log_listener_exit);
}

}  // namespace replayd::service
