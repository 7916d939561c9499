#include "service/net/session.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <cerrno>
#include <climits>
#include <cstring>

#include "service/commands/command.h"
#include "service/commands/dispatch.h"

namespace replayd::service {
namespace {

constexpr std::size_t kReadChunkBytes = 64 << 10;
// Payload bytes still missing above which the reader reads straight into the frame.
constexpr std::size_t kDirectReadBytes = 16 << 10;
constexpr std::size_t kMaxRepliesPerWrite = 64;
// How often a reader paused by its budget checks whether the client closed the connection.
constexpr auto kPeerCheckPeriod = std::chrono::milliseconds(500);
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
      account_(context.scheduler, *this),
      parking_(*this, context.limits.max_waiting_per_connection),
      plane_(socket_.native_handle(),
             shm::plane_access(socket_.native_handle(), context.column_memory != nullptr),
             context.plane,
             shm::ConnectionPlaneLimits{context.limits.max_staging_bytes_per_connection,
                                        context.limits.max_staging_arenas_per_connection,
                                        context.limits.max_unread_descriptors_per_connection}),
      read_chunk_(kReadChunkBytes),
      watchdog_(socket_.get_executor()) {
  context_.sessions.insert(this);
  context_.metrics.connection_opened();
  id_ = context_.next_connection_id++;
}

Session::~Session() {
  context_.sessions.erase(this);
  // What it still held leaves the server-wide count (waking readers paused by it).
  release(outbox_bytes_, outbox_bytes_);
  release(parked_bytes_, parked_bytes_);
  // The connection was the writer of its open episodes: they end as truncated, steps kept.
  context_.tables.end_writer(id_);
  context_.values.end_connection(id_);  // its unfinished publishes are dropped
  context_.metrics.connection_closed();
  if (context_.sessions.empty()) context_.sessions_drained.wake_all();
}

void Session::require_token() {
  token_guard_.require(context_.auth_token);
  decoder_.set_limits(token_guard_.frame_limits(context_.limits));
}

void Session::start() {
  // write_now's synchronous writes must never block (one ioctl here, not one per reply);
  // asynchronous operations are unaffected by this flag.
  asio::error_code ignored;
  socket_.non_blocking(true, ignored);
  auto executor = socket_.get_executor();
  asio::co_spawn(
      executor, [self = shared_from_this()] { return self->read_loop(false); }, log_coroutine_exit);
  asio::co_spawn(
      executor, [self = shared_from_this()] { return self->write_loop(); }, log_coroutine_exit);
  if (context_.limits.idle_timeout_ms > 0 || context_.limits.write_timeout_ms > 0) {
    asio::co_spawn(
        executor,
        [self = shared_from_this()] {
          return watch_connection(
              *self, self->watchdog_,
              std::chrono::milliseconds(self->context_.limits.idle_timeout_ms),
              std::chrono::milliseconds(self->context_.limits.write_timeout_ms));
        },
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
  // Over the server-wide budget, only connections that hold some of it wait: one that holds
  // nothing (a learner that reads its replies) keeps going, so the buffers can drain.
  const bool server_full = context_.buffered_bytes > context_.limits.max_buffered_bytes &&
                           outbox_bytes_ + parked_bytes_ > 0;
  return outbox_bytes_ > context_.limits.max_queued_reply_bytes ||
         parked_bytes_ > context_.limits.max_frame_bytes || server_full;
}

void Session::hold(std::size_t& counter, std::size_t bytes) {
  counter += bytes;
  context_.buffered_bytes += bytes;
}

void Session::release(std::size_t& counter, std::size_t bytes) {
  counter -= bytes;
  const bool was_full = context_.buffered_bytes > context_.limits.max_buffered_bytes;
  context_.buffered_bytes -= bytes;
  read_resume_.wake_front();
  if (was_full && context_.buffered_bytes <= context_.limits.max_buffered_bytes) {
    for (Session* session : context_.sessions)  // readers paused by the server-wide budget
      session->read_resume_.wake_front();
  }
}

bool Session::waits_for_server() const {
  // A parked request waits for data (rate limiter, minimum size), not for the thread.
  if (!outbox_.empty()) return true;
  if (!reading_ || reading_paused()) return false;
  asio::error_code ec;
  return socket_.available(ec) > 0 && !ec;
}

void Session::request_suspends() {
  // The synchronous part of the request's handler is the connection's work.
  account_.worked(std::chrono::steady_clock::now() - handle_began_);
  if (account_.lane() == Lane::learner) context_.scheduler.learner_parked();
  ++reader_;
  // A new reader goes on with the next requests; it starts on a later turn of the
  // io_context, so readers never nest on the stack however many requests wait.
  asio::co_spawn(
      socket_.get_executor(),
      [self = shared_from_this()]() -> asio::awaitable<void> {
        co_await asio::post(self->socket_.get_executor(), asio::use_awaitable);
        co_await self->read_loop(true);
      },
      log_coroutine_exit);
}

void Session::parked_bytes_changed(std::size_t held, bool parked) {
  if (parked) {
    hold(parked_bytes_, held);
  } else {
    release(parked_bytes_, held);
  }
}

void Session::command_known(void* session, const Command& command) {
  static_cast<Session*>(session)->account_.sent(command.lane);
}

asio::awaitable<std::size_t> Session::read_some(std::span<std::byte> into) {
  if (account_.lane() == Lane::explorer && account_.shared()) {
    // An explorer's read is a system call whose time the scheduler charges to it (it often
    // wakes the explorer's process, blocked on a full socket: far more than its bytes).
    // The other connections' ready handlers run first; then a synchronous read, timed
    // (the socket is non-blocking); an empty socket is waited for below. Without learners
    // there is nothing to share: the read is Asio's alone, one system call fewer.
    co_await asio::post(socket_.get_executor(), asio::use_awaitable);
    const auto began = std::chrono::steady_clock::now();
    asio::error_code ec;
    const std::size_t n = socket_.read_some(asio::buffer(into.data(), into.size()), ec);
    if (ec != asio::error::would_block && ec != asio::error::try_again) {
      account_.worked(std::chrono::steady_clock::now() - began);
      co_return ec ? 0 : n;  // its bytes count too (read_loop)
    }
  }
  // Asio's reactor reads a ready socket only when it runs this read's completion, in turn
  // with the other handlers, so a request a learner sent stays in its socket, visible to
  // the scheduler (waits_for_server), until this coroutine handles it.
  auto [ec, n] = co_await socket_.async_read_some(asio::buffer(into.data(), into.size()), as_tuple);
  co_return ec ? 0 : n;
}

bool Session::peer_closed() {
  pollfd descriptor{socket_.native_handle(), POLLRDHUP, 0};
  return ::poll(&descriptor, 1, 0) > 0 && (descriptor.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

asio::awaitable<void> Session::wait_for_budget() {
  auto executor = co_await asio::this_coro::executor;
  while (reading_ && reading_paused()) {
    WaitQueue::Waiter waiter(read_resume_, executor);
    const auto outcome = co_await waiter.wait(std::chrono::steady_clock::now() + kPeerCheckPeriod);
    if (outcome == WaitOutcome::cancelled) co_return;
    // Nothing is read while paused, so a client that went away is noticed here; its
    // parked requests are then cancelled instead of waiting for ever.
    if (outcome == WaitOutcome::timed_out && peer_closed()) stop_reading();
  }
}

asio::awaitable<void> Session::read_loop(bool handover) {
  const std::uint64_t me = reader_;
  try {
    if (handover) {
      handled_this_turn_ = 0;
      // The request that handed over has just parked: the budget may be spent.
      if (reading_paused()) co_await wait_for_budget();
      co_await consume(std::exchange(unconsumed_, {}));
      if (me != reader_) co_return;
    }
    while (reading_) {
      if (reading_paused()) co_await wait_for_budget();
      if (!reading_) break;
      handled_this_turn_ = 0;
      const auto destination = decoder_.payload_destination();
      const bool direct = destination.size() >= kDirectReadBytes;
      const std::size_t n = co_await read_some(direct ? destination : std::span(read_chunk_));
      if (n == 0) break;
      context_.metrics.bytes_received(n);
      read_at_ = std::chrono::steady_clock::now();
      account_.moved(n);
      if (account_.lane() == Lane::explorer) co_await context_.scheduler.explorer_turn();
      if (direct) {
        decoder_.commit_payload(n);
        if (decoder_.has_frame()) co_await handle(decoder_.take_frame());
      } else {
        co_await consume({read_chunk_.data(), n});
      }
      if (me != reader_) co_return;  // a request suspended: a new reader goes on
    }
  } catch (const std::exception& e) {
    if (me != reader_) {  // a suspended request's failure; the connection is another's now
      spdlog::error("a waiting request failed: {}", e.what());
      co_return;
    }
    // The frame boundary may be lost: log, count and end the session cleanly.
    spdlog::error("closing a connection after an unexpected error: {}", e.what());
    send(make_error_reply(decoder_.current_request_id(), WireError::resource_exhausted,
                          std::string("the server could not handle this connection's request (") +
                              e.what() + "); the connection is closed"));
  }
  stop_reading();
}

asio::awaitable<void> Session::consume(std::span<const std::byte> bytes) {
  auto executor = co_await asio::this_coro::executor;
  const std::uint64_t me = reader_;
  while (!bytes.empty() && reading_) {
    const std::size_t used = decoder_.feed(bytes);
    bytes = bytes.subspan(used);
    if (decoder_.error() != DecodeError::none) {
      fail_decoding(decoder_.error());
      co_return;
    }
    if (!decoder_.has_frame()) continue;
    unconsumed_ = bytes;  // the next reader's, should this request suspend
    co_await handle(decoder_.take_frame());
    if (me != reader_) co_return;
    unconsumed_ = {};
    if (bytes.empty()) break;
    // The rest of the chunk waits for the budget, and for other connections' turns.
    if (++handled_this_turn_ >= context_.limits.requests_per_turn) {
      handled_this_turn_ = 0;
      co_await asio::post(executor, asio::use_awaitable);
    }
    if (reading_paused()) co_await wait_for_budget();
  }
}

void Session::fail_decoding(DecodeError error) {
  if (token_guard_.pending() && error == DecodeError::frame_too_large) {
    send(make_error_reply(decoder_.current_request_id(), WireError::unauthenticated,
                          TokenGuard::too_large_message()));
    stop_reading();
    return;
  }
  const WireError code =
      is_limit_error(error) ? WireError::resource_exhausted : WireError::protocol_error;
  send(make_error_reply(decoder_.current_request_id(), code,
                        std::string(decode_error_message(error)) +
                            "; the connection is closed because the frame boundary is lost"));
  stop_reading();
}

void Session::stop_reading() {
  if (!reading_) return;
  reading_ = false;
  asio::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_receive, ignored);
  parking_.cancel_all(CancelReason::connection_closed);
  outbox_ready_.wake_all();
}

bool Session::authenticate(const WireFrame& frame) {
  if (auto refusal = token_guard_.check(frame)) {
    spdlog::warn("tcp connection refused: {}", *refusal);
    send(make_error_reply(frame.header.request_id, WireError::unauthenticated, *refusal));
    stop_reading();
    return false;
  }
  decoder_.set_limits(token_guard_.frame_limits(context_.limits));
  return true;
}

asio::awaitable<void> Session::handle(WireFrame frame) {
  last_activity_ = std::chrono::steady_clock::now();
  ++context_.activity;
  if (token_guard_.pending() && !authenticate(frame)) co_return;
  const auto received_at = read_at_;
  // A learner far ahead of another that competes for the thread waits for its turn.
  if (account_.lane() == Lane::learner && context_.scheduler.learner_must_wait(this)) {
    co_await context_.scheduler.learner_turn(this);
  }
  const std::uint64_t reader = reader_;
  handle_began_ = std::chrono::steady_clock::now();
  Dispatched done =
      co_await dispatch(context_, std::move(frame),
                        RequestOrigin{id_, parking_, &Session::command_known, this, &plane_});
  const bool suspended = reader != reader_;
  if (!suspended) account_.worked(std::chrono::steady_clock::now() - handle_began_);
  if (done.shared_bytes > 0) account_.moved(done.shared_bytes);
  if (done.reply) answer(done.op, received_at, std::move(*done.reply));
  if (suspended) {
    last_activity_ = std::chrono::steady_clock::now();
    outbox_ready_.wake_all();  // the writer may be waiting for the last parked request
  }
}

void Session::answer(std::size_t op, std::chrono::steady_clock::time_point received_at,
                     Reply reply) {
  context_.metrics.request_finished(op, reply.error_code,
                                    std::chrono::steady_clock::now() - received_at);
  send(std::move(reply));
}

void Session::send(Reply reply) {
  if (write_failed_) return;
  if (reply.is_error) context_.metrics.error_replied(reply.error_code);
  if (!reply.descriptors.empty() && outbox_.empty()) {
    const std::size_t written = write_with_descriptors(reply);
    if (write_failed_ || written == reply.wire_bytes()) return;
    if (written > 0) reply.settle(written);
  }
  if (reply.borrows()) {
    const std::size_t written = outbox_.empty() ? write_now(reply) : 0;
    if (write_failed_ || written == reply.wire_bytes()) return;
    // No other handler has run: the rows are as sampled. The copy (of up to a whole large
    // sample) is the connection's work.
    const auto began = std::chrono::steady_clock::now();
    reply.settle(written);
    account_.worked(std::chrono::steady_clock::now() - began);
  }
  if (outbox_.empty()) write_waiting_since_ = std::chrono::steady_clock::now();
  hold(outbox_bytes_, reply.wire_bytes());
  outbox_.push_back(std::move(reply));
  outbox_ready_.wake_all();
}

std::size_t Session::write_now(const Reply& reply) {
  auto& buffers = write_now_buffers_;
  buffers.clear();
  reply.gather(buffers);
  std::size_t first = 0;
  const std::size_t written = write_available(buffers, first);
  if (written > 0) account_.moved(written);
  return written;
}

std::size_t Session::write_available(std::vector<asio::const_buffer>& buffers, std::size_t& first) {
  asio::error_code ec;
  std::size_t written = 0;
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

std::size_t Session::write_with_descriptors(Reply& reply) {
  std::vector<asio::const_buffer> buffers;
  reply.gather(buffers);
  std::vector<iovec> pieces;
  for (const auto& buffer : buffers)
    pieces.push_back(iovec{const_cast<void*>(buffer.data()), buffer.size()});
  std::vector<int> fds;
  for (const auto& fd : reply.descriptors)
    fds.push_back(fd.get());
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()), 0);
  msghdr message{};
  message.msg_iov = pieces.data();
  message.msg_iovlen = std::min<std::size_t>(pieces.size(), IOV_MAX);
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  const ssize_t sent = ::sendmsg(socket_.native_handle(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      spdlog::debug("writing a reply with descriptors failed: {}", std::strerror(errno));
      write_failed_ = true;
      stop_reading();
      outbox_ready_.wake_all();
    }
    return 0;
  }
  reply.descriptors.clear();  // the kernel holds its own references now
  reply.descriptor_hold.reset();
  const auto written = static_cast<std::size_t>(sent);
  context_.metrics.bytes_sent(written);
  account_.moved(written);
  last_activity_ = std::chrono::steady_clock::now();
  return written;
}

asio::awaitable<void> Session::write_loop() {
  auto executor = co_await asio::this_coro::executor;
  std::vector<asio::const_buffer> buffers;
  while (true) {
    if (outbox_.empty()) {
      if (!reading_ && parking_.empty()) break;
      WaitQueue::Waiter waiter(outbox_ready_, executor);
      co_await waiter.wait(std::nullopt);
      continue;
    }
    if (!outbox_.front().descriptors.empty() && !write_failed_) {
      // Its descriptors go with its first byte, in a write of its own.
      auto [wait_error] = co_await socket_.async_wait(asio::socket_base::wait_write, as_tuple);
      Reply& front = outbox_.front();
      const std::size_t before = front.wire_bytes();
      const std::size_t written = wait_error ? 0 : write_with_descriptors(front);
      if (wait_error) {
        write_failed_ = true;
        stop_reading();
      }
      if (write_failed_) continue;  // the loop below drops the outbox
      if (written == before) {
        outbox_.pop_front();
      } else if (written > 0) {
        front.settle(written);
      }
      release(outbox_bytes_, written);
      write_waiting_since_ = std::chrono::steady_clock::now();
      continue;
    }
    buffers.clear();
    std::size_t count = std::min(outbox_.size(), kMaxRepliesPerWrite);
    for (std::size_t i = 1; i < count; ++i) {  // a reply with descriptors starts a write
      if (!outbox_[i].descriptors.empty()) {
        count = i;
        break;
      }
    }
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const Reply& reply = outbox_[i];
      reply.gather(buffers);
      bytes += reply.wire_bytes();
    }
    // While learners share the thread, what the socket takes at once is written here, its
    // time charged to the connection (a write can wake the client's process, which costs
    // more than its bytes); the rest, below, by Asio as the socket drains. Without
    // learners, Asio writes it all: its completion comes a turn later, so replies queued
    // meanwhile (an explorer's acknowledgements) go out together.
    std::size_t first = 0;
    if (account_.shared()) {
      const auto began = std::chrono::steady_clock::now();
      write_available(buffers, first);
      account_.worked(std::chrono::steady_clock::now() - began);
    }
    asio::error_code ec = write_failed_ ? asio::error::broken_pipe : asio::error_code{};
    if (!ec && first < buffers.size()) {
      // Called before each write_some: every chunk the kernel took counts as progress for
      // the write timeout, so a slow but steady reader of a large batch is never cut off.
      auto note_progress = [this](const asio::error_code& error, std::size_t) -> std::size_t {
        write_waiting_since_ = std::chrono::steady_clock::now();
        return error ? 0 : asio::detail::default_max_transfer_size;
      };
      auto [error, written] = co_await asio::async_write(socket_, std::span(buffers).subspan(first),
                                                         note_progress, as_tuple);
      context_.metrics.bytes_sent(written);
      account_.moved(written);
      ec = error;
    }
    outbox_.erase(outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(count));
    release(outbox_bytes_, bytes);
    ++context_.activity;
    last_activity_ = write_waiting_since_ = std::chrono::steady_clock::now();
    if (ec) {
      write_failed_ = true;
      outbox_.clear();
      release(outbox_bytes_, outbox_bytes_);
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

void Session::close_idle(std::chrono::milliseconds idle_timeout) {
  spdlog::info("closing a connection idle for idle_timeout_ms = {}", idle_timeout.count());
  send(make_error_reply(0, WireError::timeout,
                        "no complete request for idle_timeout_ms = " +
                            std::to_string(idle_timeout.count()) + "; the connection is closed"));
  stop_reading();
}

void Session::close_stuck(std::chrono::milliseconds write_timeout) {
  spdlog::warn(
      "closing a connection whose replies ({} bytes queued) were not read for "
      "write_timeout_ms = {}",
      outbox_bytes_, write_timeout.count());
  asio::error_code ignored;
  socket_.close(ignored);  // pending reads and writes end with operation_aborted
}

}  // namespace replayd::service
