// ConnectionPlane: one connection's side of the shared-memory data plane (docs/SHM.md):
// whether the plane is offered to it (a Unix-socket client of the server's own uid, on a
// server with `shared_memory` on), and the staging arenas it created (`map_staging`), where
// its writers put rows that a staged insert or append then names instead of sending them.
// Ownership: owned by the Session; an arena lives until `unmap_staging`, the connection's
// end, or (whichever is last) the end of the last request that reads from it.
// Threading: io_context thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/result.h"
#include "service/protocol/staged_payload.h"
#include "service/shm/memfd.h"

namespace replayd::service::shm {

// Whether a connection may use the plane, and if not, why (for the hello reply).
struct PlaneAccess {
  bool offered = false;
  std::string reason;  // empty when offered
};

// The access of a connected socket: offered to a Unix-socket peer whose SO_PEERCRED uid is
// the server's effective uid when `enabled`; refused (with the reason) otherwise.
PlaneAccess plane_access(int socket_fd, bool enabled);

// A connection's staging arena: a sealed memfd both the client (read-write) and the server
// map. The server only reads it, as data.
struct StagingArena {
  std::uint64_t id = 0;
  UniqueFd fd;
  Mapping mapping;
};

// Staging bytes held by every connection of the server (limits.max_staging_bytes).
struct StagingBudget {
  std::uint64_t limit = 0;
  std::uint64_t held = 0;
};

class ConnectionPlane final : public StagingLookup {
 public:
  ConnectionPlane(PlaneAccess access, StagingBudget& budget,
                  std::uint64_t max_bytes_per_connection);
  ~ConnectionPlane();
  ConnectionPlane(const ConnectionPlane&) = delete;
  ConnectionPlane& operator=(const ConnectionPlane&) = delete;

  const PlaneAccess& access() const { return access_; }
  // permission_denied naming why, unless the plane is offered to this connection.
  Status require_offered(std::string_view what) const;

  // A new arena of `bytes` (1 .. max_staging_bytes_per_connection), counted against both
  // budgets before it is created. Errors: permission_denied (no plane), invalid_argument
  // (size), resource_exhausted (a budget, or the system). Returns the arena: its id names it
  // in requests, its fd goes to the client.
  Result<std::shared_ptr<StagingArena>> create_arena(std::uint64_t bytes);
  // Forgets arena `id` (requests already using it keep it mapped until they end); false
  // when there is no such arena.
  bool release_arena(std::uint64_t id);
  std::uint64_t held_bytes() const { return held_; }

  // StagingLookup.
  Result<StagedBytes> staged_bytes(std::uint64_t arena) const override;

 private:
  PlaneAccess access_;
  StagingBudget& budget_;
  std::uint64_t max_bytes_;
  std::uint64_t held_ = 0;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, std::shared_ptr<StagingArena>> arenas_;
};

}  // namespace replayd::service::shm
