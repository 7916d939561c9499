// ConnectionPlane: one connection's side of the shared-memory data plane (docs/SHM.md):
// whether the plane is offered to it (a Unix-socket client of the server's own uid, on a
// server with `shared_memory` on), the staging arenas it created (`map_staging`), where its
// writers put rows that a staged insert or append then names instead of sending them, the
// replies carrying descriptors it has not read yet, and the table blocks it was sent.
// Every resource a client can make the server hold through the plane is counted here, per
// connection and in the server's PlaneBudget, before it is created (docs/SECURITY.md).
// Ownership: owned by the Session; an arena lives until `unmap_staging`, the connection's
// end, or (whichever is last) the end of the last request that reads from it. The server
// keeps no descriptor of an arena: its memfd goes to the client in the reply.
// Threading: io_context thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

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
// map. The server reads it as data (staged rows) or stores a sample's rows into it ("into"),
// and keeps only its mapping.
struct StagingArena {
  std::uint64_t id = 0;
  Mapping mapping;
  std::uint64_t counted_bytes = 0;  // the mapping's size in whole pages, as budgets count it
};

// A region a reply is written into, and what keeps its arena mapped meanwhile.
struct ArenaTarget {
  std::span<std::byte> bytes;
  std::shared_ptr<const void> keep_alive;
};

// A new arena and the memfd to send to the client (the server keeps no copy of it).
struct ArenaGrant {
  std::shared_ptr<StagingArena> arena;
  UniqueFd fd;
};

// A table block that connections were sent (map_table): while any of them is open, the
// block's memory may still be mapped in a client, table dropped or not.
struct SentBlock {
  std::uint64_t bytes = 0;
  std::uint32_t holders = 0;  // open connections that were sent it
  bool dropped = false;       // its table is gone: memory no table accounts for
};

// What all connections hold through the plane, and the server-wide bounds (limits).
struct PlaneBudget {
  std::uint64_t max_staging_bytes = 0;
  std::uint64_t staging_bytes = 0;  // arenas, in whole pages
  std::uint64_t max_arenas = 0;
  std::uint64_t arenas = 0;
  // Descriptors in replies not written yet: each is an open file of the server.
  std::uint64_t max_queued_descriptors = 0;
  std::uint64_t queued_descriptors = 0;
  std::map<std::uint64_t, SentBlock> sent_blocks;  // by block id; only blocks with holders
  std::uint64_t dropped_block_bytes = 0;  // sum over dropped sent_blocks: still mapped, maybe

  // A table's block is gone (drop_table): what connections were sent of it counts in
  // dropped_block_bytes until they close.
  void block_dropped(std::uint64_t block);
};

// A connection's own bounds (limits.max_staging_bytes_per_connection and so on).
struct ConnectionPlaneLimits {
  std::uint64_t max_staging_bytes = 0;
  std::uint64_t max_arenas = 0;
  std::uint64_t max_unread_descriptors = 0;
};

class ConnectionPlane final : public StagingLookup {
 public:
  // `socket_fd`: the connection's socket (not owned; it outlives the plane).
  ConnectionPlane(int socket_fd, PlaneAccess access, PlaneBudget& budget,
                  ConnectionPlaneLimits limits);
  ~ConnectionPlane();
  ConnectionPlane(const ConnectionPlane&) = delete;
  ConnectionPlane& operator=(const ConnectionPlane&) = delete;

  const PlaneAccess& access() const { return access_; }
  // permission_denied naming why, unless the plane is offered to this connection.
  Status require_offered(std::string_view what) const;

  // A new arena of `bytes` (1 .. max_staging_bytes_per_connection), counted in whole pages
  // and as one arena against both budgets before it is created. Errors: permission_denied
  // (no plane), invalid_argument (size), resource_exhausted (a budget, or the system).
  // Returns the arena (its id names it in requests) and the memfd for the reply.
  Result<ArenaGrant> create_arena(std::uint64_t bytes);
  // Forgets arena `id` (requests already using it keep it mapped until they end); false
  // when there is no such arena.
  bool release_arena(std::uint64_t id);
  std::uint64_t held_bytes() const { return held_bytes_; }

  // Before a reply that carries one descriptor: counts it while the reply is queued (the
  // server's open file) and, once written, until the client has read everything sent
  // (SIOCOUTQ of the socket reads 0). Errors: resource_exhausted when this connection has
  // max_unread_descriptors such replies, or the server max_queued_descriptors queued.
  // The returned hold must live as long as the reply's descriptor (Reply::descriptor_hold).
  Result<std::shared_ptr<void>> hold_descriptor_reply();

  // This connection was sent table block `block` of `bytes` (map_table).
  void block_sent(std::uint64_t block, std::uint64_t bytes);

  // StagingLookup.
  Result<StagedBytes> staged_bytes(std::uint64_t arena) const override;

  // Arena `arena` as memory a reply is written into (a sample's "into"): its bytes and what
  // keeps them mapped while the request writes. The client may read or write them at any
  // time; the server only stores into them. Errors as staged_bytes.
  Result<ArenaTarget> reply_target(std::uint64_t arena) const;

 private:
  // Replies with descriptors: queued (the server holds the descriptor), and written but
  // possibly unread by the client. Shared with the holds, which may outlive the plane.
  struct DescriptorReplies {
    std::uint64_t queued = 0;
    std::uint64_t unread = 0;
  };

  // Arena `arena` of this connection; permission_denied without the plane (naming `use`),
  // invalid_argument naming `key` when there is no such arena.
  Result<std::shared_ptr<StagingArena>> find_arena(std::uint64_t arena, std::string_view use,
                                                   std::string_view key) const;

  int socket_fd_;
  PlaneAccess access_;
  PlaneBudget& budget_;
  ConnectionPlaneLimits limits_;
  std::uint64_t held_bytes_ = 0;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, std::shared_ptr<StagingArena>> arenas_;
  std::shared_ptr<DescriptorReplies> replies_ = std::make_shared<DescriptorReplies>();
  std::map<std::uint64_t, std::uint64_t> blocks_sent_;  // block id -> bytes
};

}  // namespace replayd::service::shm
