#include "service/waiting/off_thread.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace replayd::service {

std::atomic<int>& off_thread_running() {
  static std::atomic<int> running{0};
  return running;
}

void wait_for_off_thread_work() {
  while (off_thread_running().load() > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void lower_thread_priority(ThreadPriority priority) {
  // SCHED_IDLE, not a nice value, for idle work: a nice +10 thread that shares the
  // io_context thread's core kept it from running for a scheduler tick (4 ms) at every
  // wake-up and up to 30 ms at times, while an idle-policy thread is preempted as soon as a
  // normal one wakes. On Linux both are per thread (the thread's id; 0 names the caller).
  const sched_param idle{};
  if (priority == ThreadPriority::idle && ::sched_setscheduler(0, SCHED_IDLE, &idle) == 0) return;
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  (void)::setpriority(PRIO_PROCESS, tid, 10);
}

}  // namespace replayd::service
