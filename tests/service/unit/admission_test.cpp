// Tests of service/commands/admission.h: the one awaitable every waiting request uses: admission in
// arrival order, deadlines, cancellation (connection closed, table dropped, server stopping).
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/table/table.h"
#include "service/commands/admission.h"

using namespace replayd::service;
using namespace std::chrono_literals;

namespace {

// Work that is ready when `open` says so, and records the order it ran in.
class GateWork final : public Deferred {
 public:
  GateWork(WaitQueue& queue, const bool& open, std::vector<int>& ran, int id,
           const HostedTable* table = nullptr)
      : queue_(queue), open_(open), ran_(ran), id_(id), table_(table) {}
  WaitQueue& queue() override { return queue_; }
  bool ready() const override { return open_; }
  const HostedTable* table() const override { return table_; }
  std::string why_not_ready() const override { return "the gate is closed"; }
  Reply run() override {
    ran_.push_back(id_);
    return make_reply(static_cast<std::uint64_t>(id_), "{}");
  }

 private:
  WaitQueue& queue_;
  const bool& open_;
  std::vector<int>& ran_;
  int id_;
  const HostedTable* table_;
};

struct Outcome {
  bool done = false;
  std::optional<Reply> reply;
};

void spawn(asio::io_context& io, Deferred& work, WaitingRequest request,
           std::unordered_set<WaitQueue::Waiter*>& parked, Outcome& outcome) {
  asio::co_spawn(io, admit(work, request, parked),
                 [&outcome](std::exception_ptr error, std::optional<Reply> reply) {
                   REQUIRE_FALSE(error);
                   outcome.done = true;
                   outcome.reply = std::move(reply);
                 });
}

// Runs the io_context for `duration` (restarting it: it stops whenever it runs out of work).
void run(asio::io_context& io, std::chrono::milliseconds duration) {
  io.restart();
  io.run_for(duration);
}

std::string error_code_of(const Outcome& outcome) {
  return outcome.reply ? std::string(outcome.reply->error_code) : "no reply";
}

}  // namespace

TEST_CASE("work that is ready with nobody ahead is admitted at once; otherwise it waits") {
  WaitQueue queue;
  bool open = true;
  std::vector<int> ran;
  GateWork work(queue, open, ran, 1);
  CHECK(admitted_now(work));
  open = false;
  CHECK_FALSE(admitted_now(work));
  const Reply refusal = refuse_without_waiting({7, "sample", 0ms}, work);
  CHECK(refusal.error_code == "timeout");
  CHECK(refusal.meta.find("the gate is closed, and timeout_ms is 0") != std::string::npos);
}

TEST_CASE("waiters are admitted in arrival order, each once its condition holds") {
  asio::io_context io;
  WaitQueue queue;
  bool open = false;
  std::vector<int> ran;
  std::unordered_set<WaitQueue::Waiter*> parked;
  GateWork first(queue, open, ran, 1), second(queue, open, ran, 2), third(queue, open, ran, 3);
  Outcome a, b, c;
  spawn(io, first, {1, "insert", std::nullopt}, parked, a);
  spawn(io, second, {2, "insert", std::nullopt}, parked, b);
  spawn(io, third, {3, "insert", std::nullopt}, parked, c);
  run(io, 20ms);
  CHECK(parked.size() == 3);
  CHECK(ran.empty());
  // Opening the gate and waking only the front runs them one after another, in order.
  open = true;
  queue.wake_front();
  run(io, 20ms);
  CHECK_FALSE(b.done);  // each admitted waiter must wake the next (table_changed does)
  CHECK(ran == std::vector<int>{1});
  queue.wake_front();
  run(io, 5ms);
  queue.wake_front();
  run(io, 5ms);
  CHECK(ran == std::vector<int>{1, 2, 3});
  CHECK(a.reply->request_id == 1);
  CHECK(parked.empty());
}

TEST_CASE("a later waiter never overtakes the front, even when only it could run") {
  asio::io_context io;
  WaitQueue queue;
  bool front_open = false, back_open = true;
  std::vector<int> ran;
  std::unordered_set<WaitQueue::Waiter*> parked;
  GateWork front(queue, front_open, ran, 1), back(queue, back_open, ran, 2);
  Outcome a, b;
  spawn(io, front, {1, "sample", 30ms}, parked, a);
  spawn(io, back, {2, "sample", std::nullopt}, parked, b);
  queue.wake_all();
  run(io, 10ms);
  CHECK(ran.empty());
  // The front times out; leaving, it wakes the next, which then runs.
  run(io, 100ms);
  CHECK(error_code_of(a) == "timeout");
  CHECK(a.reply->meta.find("sample was not admitted within timeout_ms = 30") != std::string::npos);
  CHECK(ran == std::vector<int>{2});
}

TEST_CASE("a closed connection ends the wait without a reply; a stopping server answers") {
  asio::io_context io;
  WaitQueue queue;
  bool open = false;
  std::vector<int> ran;
  std::unordered_set<WaitQueue::Waiter*> parked;
  GateWork first(queue, open, ran, 1), second(queue, open, ran, 2);
  Outcome a, b;
  spawn(io, first, {1, "insert", std::nullopt}, parked, a);
  run(io, 5ms);
  for (auto* waiter : parked)
    waiter->cancel(CancelReason::connection_closed);
  run(io, 5ms);
  CHECK(a.done);
  CHECK_FALSE(a.reply);
  spawn(io, second, {2, "insert", std::nullopt}, parked, b);
  run(io, 5ms);
  queue.cancel_all(CancelReason::shutting_down);
  run(io, 5ms);
  CHECK(error_code_of(b) == "shutting_down");
  CHECK(ran.empty());
  CHECK(parked.empty());
  CHECK(queue.empty());
}

TEST_CASE("dropping the table ends its waiters with not_found naming the table") {
  asio::io_context io;
  replayd::TableConfig config;
  config.name = std::string("dropped_one");
  config.schema =
      replayd::Schema::create({replayd::Field{"x", replayd::DType::float32, {}}}).value();
  config.capacity = 8;
  TableRegistry registry;
  auto hosted = registry.add(replayd::Table::create(config).value());
  bool open = false;
  std::vector<int> ran;
  std::unordered_set<WaitQueue::Waiter*> parked;
  GateWork work(hosted->sample_waiters, open, ran, 1, hosted.get());
  Outcome outcome;
  spawn(io, work, {1, "sample", std::nullopt}, parked, outcome);
  run(io, 5ms);
  registry.drop("dropped_one");
  open = true;
  run(io, 5ms);
  CHECK(error_code_of(outcome) == "not_found");
  CHECK(outcome.reply->meta.find("table 'dropped_one' was dropped while the sample waited") !=
        std::string::npos);
  CHECK(ran.empty());
  CHECK_FALSE(admitted_now(work));
}

TEST_CASE("work that is not in order runs as soon as it is ready") {
  class Unordered final : public Deferred {
   public:
    Unordered(WaitQueue& queue, const bool& open) : queue_(queue), open_(open) {}
    WaitQueue& queue() override { return queue_; }
    bool in_order() const override { return false; }
    bool ready() const override { return open_; }
    std::string why_not_ready() const override { return "not yet"; }
    Reply run() override { return make_reply(9, "{\"ran\":true}"); }

   private:
    WaitQueue& queue_;
    const bool& open_;
  };
  asio::io_context io;
  WaitQueue queue;
  bool closed = false, open = false;
  std::vector<int> ran;
  std::unordered_set<WaitQueue::Waiter*> parked;
  GateWork blocker(queue, closed, ran, 1);
  Unordered unordered(queue, open);
  Outcome a, b;
  spawn(io, blocker, {1, "insert", std::nullopt}, parked, a);
  spawn(io, unordered, {9, "snapshot", std::nullopt}, parked, b);
  run(io, 5ms);
  open = true;
  queue.wake_all();
  run(io, 5ms);
  REQUIRE(b.reply);
  CHECK(b.reply->meta == "{\"ran\":true}");
  CHECK_FALSE(a.done);
  queue.cancel_all(CancelReason::shutting_down);
  run(io, 5ms);
}
