#include "core/storage/stream_cell.h"

#include <cstring>

#include "core/storage/copy_cell.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define REPLAYD_STREAM_STORES 1
#endif

namespace replayd {

void stream_cell(std::byte* to, const std::byte* from, std::uint64_t bytes) {
#if defined(REPLAYD_STREAM_STORES)
  if (bytes >= kStreamCellBytes) {
    // Streaming stores may pass older stores: fence so that the slot's busy stamp (set by
    // Storage::acquire) is visible before any of the new bytes (docs/SHM.md, seqlock).
    _mm_sfence();
    // Head: up to the destination's first 16-byte boundary, by memcpy.
    const auto misalignment = reinterpret_cast<std::uintptr_t>(to) & 15u;
    const std::uint64_t head = misalignment == 0 ? 0 : 16 - misalignment;
    std::memcpy(to, from, head);
    std::byte* out = to + head;
    const std::byte* in = from + head;
    std::uint64_t left = bytes - head;
    // Body: four 16-byte streaming stores per 64-byte line (SSE2: every x86-64 has it).
    for (; left >= 64; left -= 64, out += 64, in += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(out), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 48), d);
    }
    std::memcpy(out, in, left);  // tail
    _mm_sfence();  // streaming stores are weakly ordered: fence before the row is published
    return;
  }
#endif
  copy_cell(to, from, bytes);
}

}  // namespace replayd
