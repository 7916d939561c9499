#include "service/snapshot/snapshotter.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/use_awaitable.hpp>
#include <csignal>
#include <cstring>
#include <sstream>

#include "service/snapshot/segment_links.h"

namespace replayd::service {
namespace {

constexpr std::size_t kRememberedOutcomes = 16;
constexpr auto as_tuple = asio::experimental::as_tuple(asio::use_awaitable);

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

void log_exit(std::exception_ptr error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    spdlog::error("snapshot coroutine failed: {}", e.what());
  }
}

Error snapshot_failed(std::string message) {
  return make_error(ErrorCode::resource_exhausted, std::move(message));
}

SnapshotOutcome failed_outcome(std::string message) {
  SnapshotOutcome outcome;
  outcome.status = snapshot_failed(std::move(message));
  return outcome;
}

// The child's one-line report: "ok TABLES ITEMS DROPPED BYTES PATH" or "error MESSAGE".
std::string report_of(const Result<WrittenSnapshot>& written) {
  if (!written) return "error " + written.error().message;
  return "ok " + std::to_string(written->stats.tables) + " " +
         std::to_string(written->stats.items) + " " + std::to_string(written->stats.items_dropped) +
         " " + std::to_string(written->stats.bytes) + " " + written->path;
}

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

Snapshotter::Snapshotter(asio::io_context& io, const TableRegistry& tables, SnapshotOptions options,
                         const ValueStore* values)
    : io_(io), tables_(tables), values_(values), options_(std::move(options)), timer_(io) {
  // A file-size limit (ulimit -f) must fail the write with EFBIG, not kill the server.
  if (enabled()) std::signal(SIGXFSZ, SIG_IGN);
}

Snapshotter::~Snapshotter() {
  if (child_pid_ > 0) {
    ::kill(child_pid_, SIGKILL);
    ::waitpid(child_pid_, nullptr, 0);
  }
  gate_->end();
}

void Snapshotter::start() {
  if (!enabled() || options_.interval_s == 0) return;
  asio::co_spawn(io_, periodic(), log_exit);
}

asio::awaitable<void> Snapshotter::periodic() {
  while (!stopped_) {
    timer_.expires_after(std::chrono::seconds(options_.interval_s));
    auto [ec] = co_await timer_.async_wait(as_tuple);
    if (ec || stopped_) co_return;
    if (running_run_ == 0 && queued_run_ == 0) request();
  }
}

std::uint64_t Snapshotter::request() {
  if (running_run_ == 0) {
    const std::uint64_t run = ++last_run_;
    start_run(run);
    return run;
  }
  if (queued_run_ == 0) queued_run_ = ++last_run_;
  return queued_run_;
}

const SnapshotOutcome* Snapshotter::outcome(std::uint64_t run) const {
  for (const auto& [number, outcome] : outcomes_) {
    if (number == run) return &outcome;
  }
  return nullptr;
}

Result<WrittenSnapshot> Snapshotter::write_now(std::uint64_t sequence) const {
  std::vector<const Table*> tables;
  for (const auto& hosted : tables_.list())
    tables.push_back(hosted->table.get());
  // Views of the values' parts: a forked writer's copy of the store never changes.
  const std::vector<SnapshotValueOut> values =
      values_ ? values_->snapshot_values() : std::vector<SnapshotValueOut>();
  const auto created_unix_ms =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  // The segments of file tiers are linked before the image is renamed into place: a
  // complete image always has them beside it.
  std::vector<TierSegments> tiers;
  for (const auto& hosted : tables_.list()) {
    if (hosted->tier)
      tiers.push_back(TierSegments{hosted->table->name(), hosted->tier->segment_paths()});
  }
  const std::string path = snapshot_path(options_.data_dir, sequence);
  if (auto linked = link_segments(path, tiers); !linked) {
    remove_segments_of(path);
    return linked.error();
  }
  auto written = write_snapshot_file(
      options_.data_dir, sequence,
      [&](SnapshotSink& sink) { return write_snapshot(tables, created_unix_ms, sink, values); },
      options_.test_pause_ms);
  if (!written) remove_segments_of(path);
  if (written) prune_snapshots(options_.data_dir, options_.keep, kept_through_);
  return written;
}

void Snapshotter::child_main(int pipe_fd, std::uint64_t sequence, pid_t parent) {
  // The parent's signal handlers (Asio's) must not run here; die with the parent.
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(3);
  // Drop the listeners' and clients' sockets: only the parent may answer them.
  if (pipe_fd > 3) ::close_range(3, static_cast<unsigned>(pipe_fd) - 1, 0);
  ::close_range(static_cast<unsigned>(pipe_fd) + 1, ~0u, 0);
  write_all(pipe_fd, report_of(write_now(sequence)));
  ::_exit(0);
}

void Snapshotter::start_run(std::uint64_t run) {
  running_run_ = run;
  const std::uint64_t sequence = next_sequence_++;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    finish_run(run, failed_outcome(std::string("pipe: ") + std::strerror(errno)));
    return;
  }
  const auto started = std::chrono::steady_clock::now();
  const pid_t parent = ::getpid();
  gate_->begin();
  const pid_t pid = ::fork();
  if (pid == 0) child_main(fds[1], sequence, parent);
  const double stall_ms = ms_since(started);
  ::close(fds[1]);
  if (pid < 0) {
    const int error_number = errno;
    ::close(fds[0]);
    finish_run(run, failed_outcome(std::string("fork: ") + std::strerror(error_number)));
    return;
  }
  child_pid_ = pid;
  asio::co_spawn(io_, watch_child(pid, fds[0], run, started, stall_ms), log_exit);
}

asio::awaitable<void> Snapshotter::watch_child(pid_t pid, int pipe_fd, std::uint64_t run,
                                               std::chrono::steady_clock::time_point started,
                                               double stall_ms) {
  asio::posix::stream_descriptor pipe(io_, pipe_fd);
  std::string report;
  char buffer[512];
  while (true) {
    auto [ec, n] = co_await pipe.async_read_some(asio::buffer(buffer), as_tuple);
    report.append(buffer, n);
    if (ec) break;  // EOF: the child exited (or died)
  }
  if (child_pid_ != pid) co_return;  // write_final() already reaped it
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  child_pid_ = 0;
  SnapshotOutcome outcome;
  outcome.duration_ms = ms_since(started);
  outcome.stall_ms = stall_ms;
  std::istringstream in(report);
  std::string word;
  in >> word;
  if (word == "ok" && (in >> outcome.stats.tables >> outcome.stats.items >>
                       outcome.stats.items_dropped >> outcome.stats.bytes)) {
    in >> std::ws;
    std::getline(in, outcome.path);
  } else if (word == "error") {
    in >> std::ws;
    std::string message;
    std::getline(in, message);
    outcome.status = snapshot_failed(message);
  } else {
    outcome.status =
        snapshot_failed("the snapshot process " + describe_exit(status) + " before finishing");
  }
  finish_run(run, std::move(outcome));
}

void Snapshotter::finish_run(std::uint64_t run, SnapshotOutcome outcome) {
  if (outcome.status && options_.on_written) options_.on_written(outcome.stats);
  if (outcome.status) {
    spdlog::info(
        "snapshot {}: {} tables, {} items saved, {} dropped (overwritten while written), {} "
        "bytes in {:.1f} ms (fork stalled serving for {:.2f} ms)",
        outcome.path, outcome.stats.tables, outcome.stats.items, outcome.stats.items_dropped,
        outcome.stats.bytes, outcome.duration_ms, outcome.stall_ms);
  } else {
    spdlog::error("snapshot failed: {}; serving continues, earlier snapshots are kept",
                  outcome.status.error().message);
  }
  outcomes_.emplace_back(run, std::move(outcome));
  if (outcomes_.size() > kRememberedOutcomes) outcomes_.pop_front();
  running_run_ = 0;
  gate_->end();
  finished_.wake_all();
  if (queued_run_ != 0 && !stopped_) {
    const std::uint64_t next = queued_run_;
    queued_run_ = 0;
    start_run(next);
  }
}

void Snapshotter::stop() {
  stopped_ = true;
  timer_.cancel();
  finished_.cancel_all(CancelReason::shutting_down);
}

SnapshotOutcome Snapshotter::write_final() {
  SnapshotOutcome outcome;
  if (!enabled()) return outcome;
  if (child_pid_ > 0) {
    ::kill(child_pid_, SIGKILL);
    while (::waitpid(child_pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    child_pid_ = 0;
    remove_snapshot_temporaries(options_.data_dir);
  }
  gate_->end();
  const auto started = std::chrono::steady_clock::now();
  auto written = write_now(next_sequence_++);
  outcome.duration_ms = ms_since(started);
  if (!written) {
    outcome.status = written.error();
    spdlog::error("final snapshot failed: {}", written.error().message);
    return outcome;
  }
  outcome.path = written->path;
  outcome.stats = written->stats;
  spdlog::info("final snapshot {}: {} tables, {} items saved, {} dropped, {} bytes in {:.1f} ms",
               outcome.path, outcome.stats.tables, outcome.stats.items, outcome.stats.items_dropped,
               outcome.stats.bytes, outcome.duration_ms);
  return outcome;
}

}  // namespace replayd::service
