#include "service/session.h"

#include <spdlog/spdlog.h>
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "service/snapshot_op.h"

#include "service/auth.h"

namespace replayd::service {
namespace {

constexpr std::size_t kReadChunkBytes = 64 << 10;
// Payload bytes still missing above which the reader reads straight into the frame.
constexpr std::size_t kDirectReadBytes = 16 << 10;
constexpr std::size_t kMaxRepliesPerWrite = 64;
constexpr auto as_tuple = asio::experimental::as_tuple(asio::use_awaitable);

void log_coroutine_exit(std::exception_ptr error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    spdlog::error("connection coroutine failed: {}", e.what());
  }
}

}  // namespace

Session::Session(Socket socket, ServiceContext& context)
    : socket_(std::move(socket)),
      context_(context),
      decoder_(FrameLimits{context.limits.max_frame_bytes, context.limits.max_meta_bytes}),
      watchdog_(socket_.get_executor()) {
  context_.sessions.insert(this);
  context_.metrics.connection_opened();
}

Session::~Session() {
  context_.sessions.erase(this);
  context_.metrics.connection_closed();
  if (context_.sessions.empty()) context_.sessions_drained.wake_all();
}

void Session::require_token() {
  authenticated_ = false;
  decoder_.set_limits(
      FrameLimits{kHeaderBytes + context_.limits.max_meta_bytes, context_.limits.max_meta_bytes});
}

void Session::start() {
  // write_now's synchronous writes must never block (one ioctl here, not one per reply);
  // asynchronous operations are unaffected by this flag.
  asio::error_code ignored;
  socket_.non_blocking(true, ignored);
  auto executor = socket_.get_executor();
  asio::co_spawn(
      executor, [self = shared_from_this()] { return self->read_loop(); }, log_coroutine_exit);
  asio::co_spawn(
      executor, [self = shared_from_this()] { return self->write_loop(); }, log_coroutine_exit);
  if (context_.limits.idle_timeout_ms > 0 || context_.limits.write_timeout_ms > 0) {
    asio::co_spawn(
        executor, [self = shared_from_this()] { return self->watch_timeouts(); },
        log_coroutine_exit);
  }
}

void Session::begin_shutdown() {
  asio::error_code ignored;
  // Makes a pending read complete with EOF without touching pending writes.
  socket_.shutdown(asio::socket_base::shutdown_receive, ignored);
  read_resume_.cancel_all(CancelReason::shutting_down);
}

bool Session::reading_paused() const {
  return outbox_bytes_ > context_.limits.max_queued_reply_bytes;
}

asio::awaitable<void> Session::read_loop() {
  auto executor = co_await asio::this_coro::executor;
  std::vector<std::byte> chunk(kReadChunkBytes);
  while (reading_) {
    while (reading_paused()) {
      WaitQueue::Waiter waiter(read_resume_, executor);
      if (co_await waiter.wait(std::nullopt) == WaitOutcome::cancelled) break;
    }
    const auto destination = decoder_.payload_destination();
    if (destination.size() >= kDirectReadBytes) {
      auto [ec, n] = co_await socket_.async_read_some(
          asio::buffer(destination.data(), destination.size()), as_tuple);
      if (ec) break;
      context_.metrics.bytes_received(n);
      read_at_ = std::chrono::steady_clock::now();
      decoder_.commit_payload(n);
      if (decoder_.has_frame()) handle(decoder_.take_frame());
      continue;
    }
    auto [ec, n] = co_await socket_.async_read_some(asio::buffer(chunk), as_tuple);
    if (ec) break;
    context_.metrics.bytes_received(n);
    read_at_ = std::chrono::steady_clock::now();
    consume({chunk.data(), n});
  }
  stop_reading();
}

void Session::consume(std::span<const std::byte> bytes) {
  while (!bytes.empty() && reading_) {
    const std::size_t used = decoder_.feed(bytes);
    bytes = bytes.subspan(used);
    if (decoder_.has_frame()) {
      handle(decoder_.take_frame());
    } else if (decoder_.error() != DecodeError::none) {
      const DecodeError error = decoder_.error();
      if (!authenticated_ && error == DecodeError::frame_too_large) {
        send(make_error_reply(decoder_.current_request_id(), WireError::unauthenticated,
                              "this TCP listener requires a token: the first request must be "
                              "hello with \"token\" and no payload; the connection is closed"));
        stop_reading();
        return;
      }
      const WireError code =
          is_limit_error(error) ? WireError::resource_exhausted : WireError::protocol_error;
      send(make_error_reply(decoder_.current_request_id(), code,
                            std::string(decode_error_message(error)) +
                                "; the connection is closed because the frame boundary is lost"));
      stop_reading();
      return;
    }
  }
}

void Session::stop_reading() {
  if (!reading_) return;
  reading_ = false;
  asio::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_receive, ignored);
  for (auto* waiter : parked_)
    waiter->cancel(CancelReason::connection_closed);
  outbox_ready_.wake_all();
}

bool Session::authenticate(const Frame& frame) {
  if (auto refusal = refuse_unauthenticated(context_.auth_token, frame.meta)) {
    spdlog::warn("tcp connection refused: {}", *refusal);
    send(make_error_reply(frame.header.request_id, WireError::unauthenticated, *refusal));
    stop_reading();
    return false;
  }
  authenticated_ = true;
  decoder_.set_limits(FrameLimits{context_.limits.max_frame_bytes, context_.limits.max_meta_bytes});
  return true;
}

void Session::handle(Frame frame) {
  last_activity_ = std::chrono::steady_clock::now();
  if (!authenticated_ && !authenticate(frame)) return;
  const auto received_at = read_at_;
  metrics::RequestOp op = metrics::RequestOp::unknown;
  Dispatched dispatched = dispatch(context_, std::move(frame), &op);
  if (auto* reply = std::get_if<Reply>(&dispatched)) {
    answer(op, received_at, std::move(*reply));
  } else if (auto* insert = std::get_if<PreparedInsert>(&dispatched)) {
    insert->received_at = received_at;
    handle_insert(std::move(*insert));
  } else if (auto* snapshot = std::get_if<PreparedSnapshot>(&dispatched)) {
    handle_snapshot(*snapshot);
  } else {
    auto& sample = std::get<PreparedSample>(dispatched);
    sample.received_at = received_at;
    handle_sample(std::move(sample));
  }
}

void Session::answer(metrics::RequestOp op, std::chrono::steady_clock::time_point received_at,
                     Reply reply) {
  context_.metrics.request_finished(op, reply.error_code,
                                    std::chrono::steady_clock::now() - received_at);
  send(std::move(reply));
}

bool Session::may_park(metrics::RequestOp op, std::uint64_t request_id,
                       std::chrono::steady_clock::time_point received_at) {
  if (parked_.size() < context_.limits.max_waiting_per_connection) return true;
  answer(op, received_at,
         make_error_reply(request_id, WireError::resource_exhausted,
                          "this connection already has max_waiting_per_connection = " +
                              std::to_string(context_.limits.max_waiting_per_connection) +
                              " requests waiting"));
  return false;
}

void Session::handle_insert(PreparedInsert insert) {
  HostedTable& hosted = *insert.table;
  if (hosted.insert_waiters.empty() && hosted.table->may_insert(insert.n)) {
    answer(metrics::RequestOp::insert, insert.received_at, execute_insert(insert));
    table_changed(hosted);
    return;
  }
  if (insert.timeout && insert.timeout->count() == 0) {
    answer(metrics::RequestOp::insert, insert.received_at,
           make_error_reply(insert.request_id, WireError::timeout,
                            "table '" + hosted.table->name() +
                                "': the rate limiter does not admit this insert now and "
                                "timeout_ms is 0"));
    return;
  }
  if (!may_park(metrics::RequestOp::insert, insert.request_id, insert.received_at)) return;
  asio::co_spawn(
      socket_.get_executor(),
      [self = shared_from_this(), insert = std::move(insert)]() mutable {
        return self->wait_then_insert(std::move(insert));
      },
      log_coroutine_exit);
}

void Session::handle_sample(PreparedSample sample) {
  HostedTable& hosted = *sample.table;
  if (hosted.sample_waiters.empty() && hosted.table->may_sample(sample.n)) {
    answer(metrics::RequestOp::sample, sample.received_at, execute_sample(sample));
    table_changed(hosted);
    return;
  }
  if (sample.timeout && sample.timeout->count() == 0) {
    answer(metrics::RequestOp::sample, sample.received_at,
           make_error_reply(sample.request_id, WireError::timeout,
                            "table '" + hosted.table->name() +
                                "': not enough items or the rate limiter does not admit this "
                                "sample now, and timeout_ms is 0"));
    return;
  }
  if (!may_park(metrics::RequestOp::sample, sample.request_id, sample.received_at)) return;
  asio::co_spawn(
      socket_.get_executor(),
      [self = shared_from_this(), sample = std::move(sample)]() mutable {
        return self->wait_then_sample(std::move(sample));
      },
      log_coroutine_exit);
}

namespace {

// Waits on `queue` until `admitted()` holds at the front, then runs `execute`. Returns the
// reply to send, or nullopt when the connection closed (nothing to send).
template <typename Admitted, typename Execute>
asio::awaitable<std::optional<Reply>> wait_for_admission(
    WaitQueue& queue, std::unordered_set<WaitQueue::Waiter*>& parked, const HostedTable& hosted,
    std::uint64_t request_id, std::optional<std::chrono::milliseconds> timeout, const char* what,
    Admitted admitted, Execute execute) {
  auto executor = co_await asio::this_coro::executor;
  WaitQueue::Waiter waiter(queue, executor);
  parked.insert(&waiter);
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (timeout) deadline = std::chrono::steady_clock::now() + *timeout;
  std::optional<Reply> reply;
  while (true) {
    if (waiter.at_front() && !hosted.dropped && admitted()) {
      waiter.leave();
      reply = execute();
      break;
    }
    const WaitOutcome outcome = co_await waiter.wait(deadline);
    if (outcome == WaitOutcome::woken) continue;
    const bool was_front = waiter.at_front();
    waiter.leave();
    if (was_front) queue.wake_front();
    if (outcome == WaitOutcome::timed_out) {
      reply = make_error_reply(
          request_id, WireError::timeout,
          "table '" + hosted.table->name() + "': " + what +
              " was not admitted within timeout_ms = " + std::to_string(timeout->count()));
    } else if (waiter.cancel_reason() == CancelReason::table_dropped) {
      reply = make_error_reply(
          request_id, WireError::not_found,
          "table '" + hosted.table->name() + "' was dropped while the " + what + " waited");
    } else if (waiter.cancel_reason() == CancelReason::shutting_down) {
      reply = make_error_reply(
          request_id, WireError::shutting_down,
          std::string("the server is shutting down; the ") + what + " was not executed");
    }
    break;  // connection_closed: no reply
  }
  parked.erase(&waiter);
  co_return reply;
}

}  // namespace

asio::awaitable<void> Session::wait_then_insert(PreparedInsert insert) {
  auto hosted = insert.table;
  const auto parked_at = std::chrono::steady_clock::now();
  auto reply = co_await wait_for_admission(
      hosted->insert_waiters, parked_, *hosted, insert.request_id, insert.timeout, "insert",
      [&] { return hosted->table->may_insert(insert.n); },
      [&] {
        Reply result = execute_insert(insert);
        table_changed(*hosted);
        return result;
      });
  context_.metrics.rate_limiter_waited(metrics::RequestOp::insert,
                                       std::chrono::steady_clock::now() - parked_at);
  if (reply) answer(metrics::RequestOp::insert, insert.received_at, std::move(*reply));
  last_activity_ = std::chrono::steady_clock::now();
  outbox_ready_.wake_all();  // the writer may be waiting for the last parked request
}

asio::awaitable<void> Session::wait_then_sample(PreparedSample sample) {
  auto hosted = sample.table;
  const auto parked_at = std::chrono::steady_clock::now();
  auto reply = co_await wait_for_admission(
      hosted->sample_waiters, parked_, *hosted, sample.request_id, sample.timeout, "sample",
      [&] { return hosted->table->may_sample(sample.n); },
      [&] {
        Reply result = execute_sample(sample);
        table_changed(*hosted);
        return result;
      });
  context_.metrics.rate_limiter_waited(metrics::RequestOp::sample,
                                       std::chrono::steady_clock::now() - parked_at);
  if (reply) answer(metrics::RequestOp::sample, sample.received_at, std::move(*reply));
  last_activity_ = std::chrono::steady_clock::now();
  outbox_ready_.wake_all();
}

void Session::handle_snapshot(PreparedSnapshot snapshot) {
  const auto received_at = read_at_;
  if (!may_park(metrics::RequestOp::snapshot, snapshot.request_id, received_at)) return;
  asio::co_spawn(
      socket_.get_executor(),
      [self = shared_from_this(), snapshot, received_at] {
        return self->wait_then_snapshot(snapshot, received_at);
      },
      log_coroutine_exit);
}

asio::awaitable<void> Session::wait_then_snapshot(
    PreparedSnapshot snapshot, std::chrono::steady_clock::time_point received_at) {
  auto reply = co_await await_snapshot(*context_.snapshots, parked_, snapshot);
  if (reply) answer(metrics::RequestOp::snapshot, received_at, std::move(*reply));
  outbox_ready_.wake_all();
}

void Session::send(Reply reply) {
  if (write_failed_) return;
  if (reply.is_error) context_.metrics.error_replied(reply.error_code);
  if (reply.borrows()) {
    const std::size_t written = outbox_.empty() ? write_now(reply) : 0;
    if (write_failed_ || written == reply.wire_bytes()) return;
    reply.settle(written);  // no other handler has run: the rows are as sampled
  }
  if (outbox_.empty()) write_waiting_since_ = std::chrono::steady_clock::now();
  outbox_bytes_ += reply.wire_bytes();
  outbox_.push_back(std::move(reply));
  outbox_ready_.wake_all();
}

std::size_t Session::write_now(const Reply& reply) {
  auto& buffers = write_now_buffers_;
  buffers.clear();
  reply.gather(buffers);
  asio::error_code ec;
  std::size_t written = 0;
  std::size_t first = 0;  // buffers[first...] are still to write
  while (!ec && first < buffers.size()) {
    const std::size_t sent =
        socket_.write_some(std::span(buffers).subspan(first), ec);  // at most 64 buffers a call
    written += sent;
    for (std::size_t left = sent; left > 0 && first < buffers.size();) {
      const std::size_t taken = std::min(left, buffers[first].size());
      buffers[first] += taken;
      left -= taken;
      if (buffers[first].size() == 0) ++first;
    }
    while (first < buffers.size() && buffers[first].size() == 0)
      ++first;
  }
  if (written > 0) {
    context_.metrics.bytes_sent(written);
    last_activity_ = std::chrono::steady_clock::now();
  }
  if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
    spdlog::debug("writing a reply failed: {}", ec.message());
    write_failed_ = true;
    stop_reading();
    outbox_ready_.wake_all();
  }
  return written;
}

asio::awaitable<void> Session::write_loop() {
  auto executor = co_await asio::this_coro::executor;
  std::vector<asio::const_buffer> buffers;
  while (true) {
    if (outbox_.empty()) {
      if (!reading_ && parked_.empty()) break;
      WaitQueue::Waiter waiter(outbox_ready_, executor);
      co_await waiter.wait(std::nullopt);
      continue;
    }
    buffers.clear();
    const std::size_t count = std::min(outbox_.size(), kMaxRepliesPerWrite);
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const Reply& reply = outbox_[i];
      reply.gather(buffers);
      bytes += reply.wire_bytes();
    }
    // Called before each write_some: every chunk the kernel took counts as progress for
    // the write timeout, so a slow but steady reader of a large batch is never cut off.
    auto note_progress = [this](const asio::error_code& error, std::size_t) -> std::size_t {
      write_waiting_since_ = std::chrono::steady_clock::now();
      return error ? 0 : asio::detail::default_max_transfer_size;
    };
    auto [ec, written] = co_await asio::async_write(socket_, buffers, note_progress, as_tuple);
    context_.metrics.bytes_sent(written);
    outbox_.erase(outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(count));
    outbox_bytes_ -= bytes;
    last_activity_ = write_waiting_since_ = std::chrono::steady_clock::now();
    read_resume_.wake_front();
    if (ec) {
      write_failed_ = true;
      outbox_.clear();
      outbox_bytes_ = 0;
      stop_reading();
      break;
    }
  }
  asio::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
  closed_ = true;
  watchdog_.cancel();
}

asio::awaitable<void> Session::watch_timeouts() {
  using Clock = std::chrono::steady_clock;
  const std::chrono::milliseconds idle_timeout(context_.limits.idle_timeout_ms);
  const std::chrono::milliseconds write_timeout(context_.limits.write_timeout_ms);
  while (!closed_) {
    const auto now = Clock::now();
    const bool quiescent = reading_ && parked_.empty() && outbox_.empty();
    if (write_timeout.count() > 0 && !outbox_.empty() &&
        now - write_waiting_since_ >= write_timeout) {
      spdlog::warn(
          "closing a connection whose replies ({} bytes queued) were not read for "
          "write_timeout_ms = {}",
          outbox_bytes_, write_timeout.count());
      asio::error_code ignored;
      socket_.close(ignored);  // pending reads and writes end with operation_aborted
      co_return;
    }
    if (idle_timeout.count() > 0 && quiescent && now - last_activity_ >= idle_timeout) {
      spdlog::info("closing a connection idle for idle_timeout_ms = {}", idle_timeout.count());
      send(make_error_reply(
          0, WireError::timeout,
          "no complete request for idle_timeout_ms = " + std::to_string(idle_timeout.count()) +
              "; the connection is closed"));
      stop_reading();
      continue;
    }
    // Sleep until the earliest moment either rule could fire; a rule whose condition does not
    // hold now cannot fire sooner than one full timeout from now.
    auto next = now + std::chrono::hours(24);
    if (idle_timeout.count() > 0 && reading_) {
      next = std::min(next, (quiescent ? last_activity_ : now) + idle_timeout);
    }
    if (write_timeout.count() > 0) {
      next = std::min(next, (outbox_.empty() ? now : write_waiting_since_) + write_timeout);
    }
    watchdog_.expires_at(next);
    co_await watchdog_.async_wait(as_tuple);
  }
}

}  // namespace replayd::service
