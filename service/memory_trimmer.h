// Memory trimmer: returns freed heap memory to the operating system once the server goes
// quiet after a burst. service/main.cpp keeps large request and reply buffers in the heap
// for reuse (M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 128 MiB), which makes steady traffic
// fast but leaves a burst's buffers counted in the RSS for good; this gives them back when
// nothing is reused soon. Owned by the Server. Threading: io_context thread only.
#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <cstdint>

#include "service/service_context.h"

namespace replayd::service {

struct MemoryTrimPolicy {
  // How often the trimmer looks (and how long the server must have been idle).
  std::chrono::milliseconds period{1000};
  // Trim only when the heap holds at least this much free memory (glibc mallinfo2 fordblks),
  // so a steady workload that frees and reuses a few buffers never pays fresh page faults.
  std::uint64_t min_free_bytes = std::uint64_t{32} << 20;
};

// Every policy.period: when context.activity changed before the last look but not since
// (a burst ended and the server has been idle a whole period) and the heap holds at least
// policy.min_free_bytes free, calls malloc_trim(0): at most one trim per quiet spell.
// Suspends on a timer; runs until the io_context stops. Cost of a trim: a walk of the heap's
// free chunks and one madvise per free run of pages, on the io_context thread.
asio::awaitable<void> trim_memory_when_idle(ServiceContext& context, MemoryTrimPolicy policy);

// What the heap holds free now (bytes; 0 where glibc's mallinfo2 is not available).
std::uint64_t heap_free_bytes();

}  // namespace replayd::service
