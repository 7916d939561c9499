// Admission: the one way a request waits before it runs. A handler that cannot always run at
// once returns a Deferred; the runner runs it at once when it is admitted, refuses it when it
// may not wait (timeout_ms 0), and otherwise suspends it in `admit` until it is.
// Threading: io_context thread only.
//
// Wake-up order: a Deferred that is `in_order` waits in its queue behind every earlier one and
// may run only at the front (a table's inserts, and its samples, run in arrival order); one
// that is not (a snapshot waiter) runs as soon as it is ready. Whoever changes what a waiter
// waits for wakes its queue (table_changed, the Snapshotter).
// A wait ends in one of four ways: admitted (the work runs and its reply is returned), the
// deadline passed (`timeout`), the table was dropped (`not_found`), the server is stopping
// (`shutting_down`), or the connection closed (nothing is returned).
#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "service/protocol/reply.h"
#include "service/table_registry.h"
#include "service/commands/wait_queue.h"

namespace replayd::service {

// Work that runs once admitted. Owns everything it needs (e.g. the request's payload).
class Deferred {
 public:
  virtual ~Deferred() = default;

  // The queue it waits in; it outlives the wait (a table's queue lives with its HostedTable,
  // which the Deferred keeps alive).
  virtual WaitQueue& queue() = 0;
  // True: it may run only at the front of queue() (arrival order).
  virtual bool in_order() const { return true; }
  // Whether it may run now (rate limiter, min size, a finished snapshot run).
  virtual bool ready() const = 0;
  // Runs it and returns its reply; called once, only when admitted.
  virtual Reply run() = 0;
  // The table it waits on, when it waits on one (a drop ends the wait with not_found).
  virtual const HostedTable* table() const { return nullptr; }
  // Why it is not ready, for the error of a request that may not wait ("the rate limiter
  // does not admit this insert now").
  virtual std::string why_not_ready() const = 0;
  // Payload bytes it holds while it waits (counted against the connection's budget).
  virtual std::size_t held_bytes() const { return 0; }
};

// The request a Deferred answers, for error replies and logs.
struct WaitingRequest {
  std::uint64_t request_id = 0;
  std::string_view op;                               // the command's wire name
  std::optional<std::chrono::milliseconds> timeout;  // nullopt: no limit
};

// Whether `work` is admitted at once: nothing earlier waits in its queue (when in order), its
// table still exists, and it is ready.
bool admitted_now(Deferred& work);

// The error reply to a request that may not wait (timeout 0) and is not admitted now.
Reply refuse_without_waiting(const WaitingRequest& request, const Deferred& work);

// Suspends until `work` is admitted, runs it and returns its reply; or returns the error reply
// for a timeout, a dropped table or a stopping server; or nullopt when the connection closed.
// While it waits, its Waiter is in `parked` so the connection can cancel it (connection_closed)
// and count it. Wakes the next waiter of the queue when it leaves without running.
asio::awaitable<std::optional<Reply>> admit(Deferred& work, WaitingRequest request,
                                            std::unordered_set<WaitQueue::Waiter*>& parked);

}  // namespace replayd::service
