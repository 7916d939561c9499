// The prototype's control messages on the Unix socket between the owner and one client.
// Every message starts with a 16-byte Message; what follows depends on the op (below).
// Replies come back in request order, so a client may keep several requests in flight.
#pragma once

#include <cstdint>

namespace replayd::shm_proto {

enum class Op : std::uint32_t {
  // Client -> owner. `count` rows wanted. Reply: Message{bytes = payload}, then the rows
  // column after column (count * field_bytes per field).
  sample_copy = 1,
  // Client -> owner. Reply: Message{count}, then `count` u64 keys; slot = key & kSlotMask.
  sample_keys = 2,
  // Client -> owner. Reply: Message{count, bytes, ring_index}; the rows are in ring slot
  // `ring_index` (same column layout as sample_copy). The client's next request hands the
  // slot back: the owner reuses slot i % depth only after request i arrived.
  sample_ring = 3,
  // Client -> owner: `count` items (1..16), each its fields one after another. Reply:
  // Message{count}, then the items' u64 keys.
  insert_copy = 4,
  // Client -> owner: `count` u32 slots this client had reserved and has filled. Reply:
  // Message{count = k}, then k u32 newly reserved slots (the credit handed back).
  commit = 5,
  // Client -> owner: asks for `count` reserved slots. Reply as for commit.
  reserve = 6,
  // Client -> owner: the run is over; the owner answers Message{op = stop} and returns.
  stop = 7,
  // Client -> owner: asks for `count` rows of its own staging area (a memfd only it and the
  // owner map). Reply: Message{count = k}, then k u32 staging rows.
  reserve_staged = 8,
  // Client -> owner: `count` u32 staging rows it has filled (one item each, fields one
  // after another). The owner copies each into the table (oldest slot evicted) and hands
  // the rows back: Message{count = k}, then the k u32 rows, free to fill again.
  commit_staged = 9,
};

struct Message {
  Op op{};
  std::uint32_t count = 0;
  std::uint32_t bytes = 0;       // payload bytes that follow (sample_copy, insert_copy)
  std::uint32_t ring_index = 0;  // sample_ring only
};
static_assert(sizeof(Message) == 16);

// Keys are generation << 32 | slot, never reused (a new generation per overwrite).
constexpr std::uint64_t kSlotMask = 0xffff'ffffULL;
// The stamp of a slot whose row is being written or is reserved by a writer: no key.
constexpr std::uint64_t kBusyStamp = ~0ULL;

}  // namespace replayd::shm_proto
