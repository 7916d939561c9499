#include "worker_processes.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <stdexcept>
#include <type_traits>

namespace replayd::loadgen {
namespace {

static_assert(std::is_trivially_copyable_v<WorkerResult>);

// Reads exactly `bytes` bytes; false on EOF or error first.
bool read_all(int fd, void* data, std::size_t bytes) {
  auto* out = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, out, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    out += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

bool write_all(int fd, const void* data, std::size_t bytes) {
  const auto* in = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, in, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    in += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

struct StartSignal {
  int result_fd;  // tells the parent "connected"
  int start_fd;   // read end the parent closes to release every child at once
};

void report_ready_and_wait(void* context) {
  auto* signal = static_cast<StartSignal*>(context);
  const char ready = 'r';
  write_all(signal->result_fd, &ready, 1);
  char ignored;
  while (::read(signal->start_fd, &ignored, 1) < 0 && errno == EINTR) {
  }
}

// The child's whole life: run the worker, write the result, exit without running the
// parent's atexit handlers or destructors.
[[noreturn]] void child_main(const WorkerPlan& plan, bool learner, StartSignal signal) {
  int status = 0;
  try {
    const WorkerResult result = learner ? run_learner(plan, report_ready_and_wait, &signal)
                                        : run_explorer(plan, report_ready_and_wait, &signal);
    if (!write_all(signal.result_fd, &result, sizeof result)) status = 1;
  } catch (const std::exception& e) {
    std::cerr << "replayd_loadgen: " << (learner ? "learner" : "explorer") << ": " << e.what()
              << "\n";
    status = 1;
  }
  std::cerr.flush();
  ::_exit(status);
}

}  // namespace

WorkerRun run_worker_processes(const WorkerPlan& plan, std::uint32_t explorers,
                               std::uint32_t learners) {
  int start_pipe[2];
  if (::pipe(start_pipe) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  struct Child {
    pid_t pid;
    int result_fd;
    bool learner;
  };
  std::vector<Child> children;
  for (std::uint32_t i = 0; i < explorers + learners; ++i) {
    const bool learner = i >= explorers;
    int result_pipe[2];
    if (::pipe(result_pipe) != 0)
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    WorkerPlan child_plan = plan;
    child_plan.seed = plan.seed * 1000 + i;
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::close(start_pipe[1]);
      ::close(result_pipe[0]);
      for (const auto& other : children)
        ::close(other.result_fd);
      child_main(child_plan, learner, StartSignal{result_pipe[1], start_pipe[0]});
    }
    ::close(result_pipe[1]);
    children.push_back({pid, result_pipe[0], learner});
  }
  ::close(start_pipe[0]);

  WorkerRun run;
  std::vector<bool> alive(children.size(), true);
  for (std::size_t i = 0; i < children.size(); ++i) {
    char ready;
    alive[i] = read_all(children[i].result_fd, &ready, 1);
  }
  ::close(start_pipe[1]);  // every child's read returns 0: go
  for (std::size_t i = 0; i < children.size(); ++i) {
    WorkerResult result;
    if (alive[i] && read_all(children[i].result_fd, &result, sizeof result)) {
      (children[i].learner ? run.learners : run.explorers).push_back(result);
    } else {
      ++run.failed_workers;
    }
    ::close(children[i].result_fd);
    int status = 0;
    while (::waitpid(children[i].pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return run;
}

}  // namespace replayd::loadgen
