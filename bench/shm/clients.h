// The client side of each variant: a learner sampling or an explorer inserting through one
// connection, keeping `depth` requests in flight, for a warm-up then a timed window. Each
// function runs in its own process (pinned by the caller) and returns what it measured.
#pragma once

#include <cstddef>
#include <cstdint>

#include "reply_ring.h"
#include "shapes.h"
#include "shared_table.h"

namespace replayd::shm_proto {

struct ClientOptions {
  double warmup_s = 0.2;     // not counted
  double measure_s = 1.0;    // the timed window (the in-flight requests drain after it)
  std::size_t depth = 8;     // requests in flight
  bool verify_fill = false;  // mapped sample: check every accepted row against fill_byte
  std::size_t commit_every = 1;  // inserts: items per commit message (socket: per insert frame)
};

// Plain data: it crosses a pipe from the client process to the runner.
struct ClientResult {
  double seconds = 0;             // timed window, drain included
  double cpu_s = 0;               // the client's CPU time in the window
  std::uint64_t items = 0;        // items delivered in the window (rows that validated)
  std::uint64_t items_total = 0;  // warm-up included (for the owner's cost per item)
  std::uint64_t rows_gathered = 0;
  std::uint64_t rows_invalid = 0;  // mapped sample: key changed under the copy
  std::uint64_t reasks = 0;        // re-ask requests sent for invalid rows
  std::uint64_t torn_accepted = 0;  // verify_fill: accepted rows whose bytes were not the key's
  std::uint64_t torn_caught = 0;    // verify_fill: rejected rows whose bytes were torn
  double items_per_s() const { return seconds > 0 ? static_cast<double>(items) / seconds : 0; }
};

// (a) today's shape: rows come in the reply, through the kernel.
ClientResult run_sample_copy(int sock, const Shape& shape, const ClientOptions& options);
// (b) mapped table: keys in the reply, rows gathered from `table`, checked after the copy;
// invalid rows are re-asked (a pipelined sample of as many rows).
ClientResult run_sample_mapped(int sock, const TableView& table, const ClientOptions& options);
// (c) reply ring: rows copied by the owner into `ring`, copied out by the client.
ClientResult run_sample_ring(int sock, const Shape& shape, const ReplyRing& ring,
                             const ClientOptions& options);
// (a) `commit_every` items per insert request (1 or 16), through the kernel.
ClientResult run_insert_copy(int sock, const Shape& shape, const ClientOptions& options);
// (b) one item per call written into a reserved slot of `table` (mapped writable);
// `commit_every` slots per commit message; each commit's reply hands back as much credit.
ClientResult run_insert_mapped(int sock, const TableView& table, const ClientOptions& options);
// (b') one item per call written into a row of this client's own staging area (`staging`,
// `staging_rows` items); `commit_every` rows per commit, which the owner copies into the
// table: the table's rows are written by the owner only.
ClientResult run_insert_staged(int sock, const Shape& shape, std::byte* staging,
                               std::size_t staging_rows, const ClientOptions& options);
// (b) as above, then the process kills itself (SIGKILL) holding reserved slots, some of
// them written: what a crash mid-reservation leaves to the owner. Never returns.
[[noreturn]] void die_mid_reservation(int sock, const TableView& table);

}  // namespace replayd::shm_proto
