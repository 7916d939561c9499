#include "service/waiting/admission.h"

#include <string>

namespace replayd::service {
namespace {

std::string subject(const Call& call) {
  return call.table ? "table '" + call.table->table->name() + "': " : std::string();
}

bool table_gone(const Call& call) {
  return call.table && call.table->dropped;
}

}  // namespace

asio::awaitable<Status> admit(Call& call, AdmissionRule rule) {
  WaitQueue& queue = rule.queue;
  const bool in_order = rule.order == Order::arrival;
  if (!table_gone(call) && (!in_order || queue.empty()) && rule.ready(rule.context)) {
    co_return Ok{};  // admitted at once: no suspension
  }
  if (call.timeout && call.timeout->count() == 0) {
    co_return make_error(ErrorCode::would_block,
                         subject(call) + std::string(rule.why_not_ready) + ", and timeout_ms is 0");
  }
  auto executor = co_await asio::this_coro::executor;
  WaitQueue::Waiter waiter(queue, executor);
  if (auto parked = call.parking.enter(waiter, rule.held_bytes); !parked) {
    waiter.leave();
    co_return parked.error();
  }
  const auto parked_at = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (call.timeout) deadline = parked_at + *call.timeout;
  Status status = Ok{};
  while (true) {
    if ((!in_order || waiter.at_front()) && !table_gone(call) && rule.ready(rule.context)) {
      waiter.leave();
      break;
    }
    const WaitOutcome outcome = co_await waiter.wait(deadline);
    if (outcome == WaitOutcome::woken) continue;
    const bool was_front = waiter.at_front();
    waiter.leave();
    if (was_front && in_order) queue.wake_front();
    const std::string op(call.op);
    if (outcome == WaitOutcome::timed_out) {
      status = make_error(ErrorCode::would_block, subject(call) + op +
                                                      " was not admitted within timeout_ms = " +
                                                      std::to_string(call.timeout->count()) + ": " +
                                                      std::string(rule.why_not_ready));
    } else if (waiter.cancel_reason() == CancelReason::table_dropped) {
      status = make_error(ErrorCode::not_found, "table '" + call.table->table->name() +
                                                    "' was dropped while the " + op + " waited");
    } else if (waiter.cancel_reason() == CancelReason::shutting_down) {
      status = make_error(ErrorCode::unavailable,
                          "the server is shutting down; the " + op + " was not executed");
    } else {
      call.reply_wanted = false;  // the connection closed
      status = make_error(ErrorCode::failed_precondition, "the connection closed");
    }
    break;
  }
  call.parking.leave(waiter, rule.held_bytes);
  call.service.metrics.rate_limiter_waited(call.op_index,
                                           std::chrono::steady_clock::now() - parked_at);
  co_return status;
}

}  // namespace replayd::service
