// Admission: the one way a request waits before it acts. A handler co_awaits admit() with
// the queue it waits in and the condition that admits it; admit returns without suspending
// when the request is admitted at once, so the handler goes on to act and reply in the same
// turn of the io_context.
// Threading: io_context thread only.
//
// Wake-up order: a request that waits in arrival order (Order::arrival) stays behind every
// earlier one in its queue and is admitted only at the front (a table's inserts, and its
// samples, run in arrival order); one that does not (a snapshot waiter) is admitted as soon
// as its condition holds. Whoever changes what a waiter waits for wakes its queue
// (table_changed, the Snapshotter).
// A wait ends in one of five ways: admitted (Ok), the deadline passed (timeout), the table
// was dropped (not_found), the server is stopping (shutting_down), or the connection closed
// (Call::reply_wanted becomes false: nobody is left to read a reply).
#pragma once

#include <asio/awaitable.hpp>
#include <cstddef>
#include <string_view>

#include "service/commands/command.h"
#include "service/waiting/wait_queue.h"

namespace replayd::service {

enum class Order : std::uint8_t {
  arrival,  // behind every earlier waiter of the queue
  any,      // as soon as its condition holds
};

// What a request waits for.
struct AdmissionRule {
  WaitQueue& queue;  // where it waits; outlives the wait (a table's queue lives with its
                     // HostedTable, which the Call keeps alive)
  // Whether it may act now (rate limiter, min size, a finished snapshot run). Called on the
  // io_context thread, at admission and at each wake-up.
  bool (*ready)(const void* context);
  const void* context;
  // Why it is not ready, for the error of a request that may not wait or timed out
  // ("the rate limiter does not admit this insert now").
  std::string_view why_not_ready;
  Order order = Order::arrival;
  std::size_t held_bytes = 0;  // payload bytes the request holds while it waits (budgets)
};

// Suspends until the request is admitted under `rule`, or returns the error that ends its
// wait (see above). A request that may not wait (timeout_ms 0) and is not admitted now gets
// `timeout` at once; one beyond limits.max_waiting_per_connection gets resource_exhausted.
asio::awaitable<Status> admit(Call& call, AdmissionRule rule);

// admit() with the condition as a callable (a lambda over the handler's locals): it lives in
// the handler's frame, which outlives the wait.
template <typename Ready>
asio::awaitable<Status> admit_when(Call& call, WaitQueue& queue, const Ready& ready,
                                   std::string_view why_not_ready, Order order = Order::arrival,
                                   std::size_t held_bytes = 0) {
  const AdmissionRule rule{
      queue,  [](const void* context) { return (*static_cast<const Ready*>(context))(); },
      &ready, why_not_ready,
      order,  held_bytes};
  return admit(call, rule);
}

}  // namespace replayd::service
