#include "service/memory_trimmer.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <asio/experimental/as_tuple.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

namespace replayd::service {

std::uint64_t heap_free_bytes() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  return mallinfo2().fordblks;
#else
  return 0;
#endif
}

asio::awaitable<void> trim_memory_when_idle(ServiceContext& context, MemoryTrimPolicy policy) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  std::uint64_t seen = context.activity;        // activity at the previous look
  std::uint64_t trimmed_at = context.activity;  // activity at the last trim (or start)
  while (!context.shutting_down) {
    timer.expires_after(policy.period);
    co_await timer.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
    const std::uint64_t now = context.activity;
    const bool quiet_after_work = now == seen && now != trimmed_at;
    seen = now;
    if (!quiet_after_work) continue;
    trimmed_at = now;
    const std::uint64_t free_bytes = heap_free_bytes();
    if (free_bytes < policy.min_free_bytes) continue;
    ::malloc_trim(0);
    spdlog::debug("idle: returned free heap memory to the system ({} MiB free before)",
                  free_bytes >> 20);
  }
}

}  // namespace replayd::service
