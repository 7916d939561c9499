// A per-connection reply ring: `depth` fixed slots of `slot_bytes` in one memfd mapping.
// The owner writes reply i into slot i % depth and announces it with a Message on the
// socket; the client maps the ring read-only and copies the rows out. A slot is handed back
// by the client's next request: with at most `depth` requests in flight, reply i + depth
// is written only after request i + depth arrived, which the client sends only after it
// is done with reply i. The socket's system calls order the two processes' accesses.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <stdexcept>

namespace replayd::shm_proto {

struct ReplyRing {
  std::size_t depth = 0;
  std::size_t slot_bytes = 0;  // page-aligned
  std::byte* base = nullptr;

  std::byte* slot(std::size_t index) const { return base + (index % depth) * slot_bytes; }
  std::size_t bytes() const { return depth * slot_bytes; }
};

inline std::size_t ring_slot_bytes(std::size_t reply_bytes) {
  return (reply_bytes + 4095) / 4096 * 4096;
}

// Maps `fd` (depth * slot_bytes) shared; read-only for a client.
inline ReplyRing map_ring(int fd, std::size_t depth, std::size_t slot_bytes, bool writable) {
  ReplyRing ring{depth, slot_bytes, nullptr};
  void* at = ::mmap(nullptr, ring.bytes(), writable ? PROT_READ | PROT_WRITE : PROT_READ,
                    MAP_SHARED | MAP_POPULATE, fd, 0);
  if (at == MAP_FAILED) throw std::runtime_error("mmap of the reply ring failed");
  ring.base = static_cast<std::byte*>(at);
  return ring;
}

}  // namespace replayd::shm_proto
