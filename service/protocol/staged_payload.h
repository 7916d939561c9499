// A staged payload: the columns of an insert or append_steps that a same-host client wrote
// into one of its staging arenas (shared memory, docs/SHM.md) instead of the frame. The
// request names the arena, the offset and the rows the columns are laid out for; the
// decoder asks a StagingLookup (the connection's) for the arena's bytes.
// Threading: io_context thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/result.h"

namespace replayd::service {

struct StagedBytes {
  // The arena's bytes. The client may write them at any time: they are data only, copied
  // into the table, never read as a length or an offset.
  std::span<const std::byte> bytes;
  std::shared_ptr<const void> keep_alive;  // keeps the arena mapped while a request uses it
};

class StagingLookup {
 public:
  // The bytes of the connection's arena `arena`; invalid_argument naming it when the
  // connection has no such arena (or no data plane: permission_denied).
  virtual Result<StagedBytes> staged_bytes(std::uint64_t arena) const = 0;

 protected:
  ~StagingLookup() = default;
};

}  // namespace replayd::service
