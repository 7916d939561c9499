// TableRegistry: the server's tables by name. Each HostedTable pairs a core Table with the
// two queues of requests waiting on it. Tables are held by shared_ptr so that a waiting
// request keeps its table (and queue) alive until it finishes, even if the table is dropped
// meanwhile (then `dropped` is set and its waiters are cancelled with table_dropped).
// Threading: io_context thread only.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/table/table.h"
#include "service/tier/file_tier.h"
#include "service/waiting/wait_queue.h"

namespace replayd::service {

struct HostedTable : std::enable_shared_from_this<HostedTable> {
  explicit HostedTable(std::unique_ptr<Table> t) : table(std::move(t)) {}
  // A table of kReleasedInBackgroundBytes or more is destroyed on the release thread
  // (service/waiting/background_release.h): giving gigabytes back to the kernel must not
  // hold the io_context thread. Runs when the last holder lets go (the registry, waiting
  // requests, replies that borrow its rows).
  ~HostedTable();
  HostedTable(const HostedTable&) = delete;
  HostedTable& operator=(const HostedTable&) = delete;
  static constexpr std::uint64_t kReleasedInBackgroundBytes = std::uint64_t{64} << 20;

  std::unique_ptr<Table> table;
  WaitQueue insert_waiters;  // inserts held by the rate limiter, in arrival order
  WaitQueue sample_waiters;  // samples held by the rate limiter or min size, in arrival order
  bool dropped = false;
  // The disk side of the table's file tier (docs/FILE_TIER.md); null without one.
  std::shared_ptr<FileTier> tier;

  // Cached metadata of the last sample reply, keyed by its n (learners repeat one n).
  std::uint64_t cached_sample_n = 0;
  bool cached_sample_rows = true;  // the cached metadata lists the fields (not keys only)
  std::string cached_sample_meta;
  // The same for the last mixed sample whose first table this is (its n, rows or keys).
  std::uint64_t cached_mixed_n = 0;
  bool cached_mixed_rows = true;
  std::string cached_mixed_meta;
};

// Wakes the front waiter of each of the table's queues: call after anything that may change
// whether a waiting insert or sample is admitted (an insert, a sample, a delete, a reset).
// A table with a file tier also starts writing rows out past its RAM budget (FileTier::poke).
void table_changed(HostedTable& table);

class TableRegistry {
 public:
  // nullptr when absent.
  std::shared_ptr<HostedTable> find(std::string_view name) const;
  // Precondition: no table of that name.
  std::shared_ptr<HostedTable> add(std::unique_ptr<Table> table);
  // Removes the table, marks it dropped and cancels its waiters. False if absent.
  bool drop(std::string_view name);
  // A connection closed: its open episodes in every episodic table end as truncated (their
  // steps stay); wakes the waiters of the tables that changed. O(tables + its episodes).
  void end_writer(std::uint64_t writer);
  // After a restore: the writers of restored open episodes were connections of an earlier
  // process, so their episodes end as truncated now (steps kept). O(episodes).
  void end_all_writers();
  // Cancels every waiter of every table (server shutdown).
  void cancel_all_waiters(CancelReason reason);

  std::size_t size() const { return tables_.size(); }
  // Tables in name order.
  std::vector<std::shared_ptr<HostedTable>> list() const;

 private:
  std::map<std::string, std::shared_ptr<HostedTable>, std::less<>> tables_;
};

}  // namespace replayd::service
