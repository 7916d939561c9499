#include "service/commands/admission.h"

namespace replayd::service {
namespace {

std::string subject(const Deferred& work) {
  if (const HostedTable* table = work.table()) return "table '" + table->table->name() + "': ";
  return {};
}

bool table_gone(const Deferred& work) {
  const HostedTable* table = work.table();
  return table != nullptr && table->dropped;
}

}  // namespace

bool admitted_now(Deferred& work) {
  if (table_gone(work)) return false;
  if (work.in_order() && !work.queue().empty()) return false;
  return work.ready();
}

Reply refuse_without_waiting(const WaitingRequest& request, const Deferred& work) {
  return make_error_reply(request.request_id, WireError::timeout,
                          subject(work) + work.why_not_ready() + ", and timeout_ms is 0");
}

asio::awaitable<std::optional<Reply>> admit(Deferred& work, WaitingRequest request,
                                            std::unordered_set<WaitQueue::Waiter*>& parked) {
  auto executor = co_await asio::this_coro::executor;
  WaitQueue& queue = work.queue();
  WaitQueue::Waiter waiter(queue, executor);
  parked.insert(&waiter);
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (request.timeout) deadline = std::chrono::steady_clock::now() + *request.timeout;
  std::optional<Reply> reply;
  while (true) {
    if ((!work.in_order() || waiter.at_front()) && !table_gone(work) && work.ready()) {
      waiter.leave();
      reply = work.run();
      break;
    }
    const WaitOutcome outcome = co_await waiter.wait(deadline);
    if (outcome == WaitOutcome::woken) continue;
    const bool was_front = waiter.at_front();
    waiter.leave();
    if (was_front && work.in_order()) queue.wake_front();
    const std::string op(request.op);
    if (outcome == WaitOutcome::timed_out) {
      reply = make_error_reply(request.request_id, WireError::timeout,
                               subject(work) + op + " was not admitted within timeout_ms = " +
                                   std::to_string(request.timeout->count()));
    } else if (waiter.cancel_reason() == CancelReason::table_dropped) {
      reply = make_error_reply(
          request.request_id, WireError::not_found,
          "table '" + work.table()->table->name() + "' was dropped while the " + op + " waited");
    } else if (waiter.cancel_reason() == CancelReason::shutting_down) {
      reply = make_error_reply(request.request_id, WireError::shutting_down,
                               "the server is shutting down; the " + op + " was not executed");
    }
    break;  // connection_closed: no reply
  }
  parked.erase(&waiter);
  co_return reply;
}

}  // namespace replayd::service
