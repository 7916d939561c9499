#include "service/waiting/off_thread.h"

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

void lower_thread_priority() {
  // On Linux a thread's nice value is its own: PRIO_PROCESS with the thread's id.
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  (void)::setpriority(PRIO_PROCESS, tid, 10);
}

}  // namespace replayd::service
