// Session: one client connection. It owns the socket and nothing about operations: its
// reader decodes request frames and runs each through dispatch (service/commands/
// dispatch.h), which co_awaits the command's handler; a writer coroutine sends queued
// replies with gathered writes.
// Lifetime: held by shared_ptr from each of its coroutines; it ends when the last one does.
// Threading: io_context thread only.
//
// Reading: the reader runs each request's handler in its own coroutine, without spawning,
// so a request admitted at once costs no more than a call. When a handler must wait for
// admission (Parking::Connection::request_suspends), the suspended coroutine keeps that
// request and a new reader is spawned to go on with the connection's next requests (from
// the bytes the old reader had not consumed); the old one ends once the request is answered.
// So a waiting request never holds up the requests behind it.
// Backpressure: before each frame it handles, the reader checks the connection's budget and
// waits while queued reply bytes exceed max_queued_reply_bytes or parked requests hold more
// than max_frame_bytes of payload; the socket's flow control then slows the client. It
// handles at most limits.requests_per_turn frames before letting other connections run.
// Scheduling: an explorer connection yields to waiting learners, and a learner far ahead of
// another waits for its turn before each request (service/scheduler.h).
// Closing: on EOF, a read/write error or a framing error, parked requests are cancelled
// (removed from their tables' queues, no reply), queued replies are flushed, and the socket
// is closed. begin_shutdown() instead answers parked requests with shutting_down first.
// When the Session ends, the episodes it opened and did not end end as truncated.
// Timeouts: service/net/connection_watchdog.h. Authentication: service/net/token_guard.h.
// Shared memory: the connection's side of the data plane (whether it is offered, its staging
// arenas) is plane_ (service/shm/connection_plane.h); replies that carry descriptors are
// written with sendmsg, the descriptors with the frame's first byte.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/generic/stream_protocol.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <memory>

#include "service/net/connection_watchdog.h"
#include "service/net/token_guard.h"
#include "service/protocol/reply.h"
#include "service/protocol/wire_frame.h"
#include "service/scheduler.h"
#include "service/service_context.h"
#include "service/shm/connection_plane.h"
#include "service/waiting/parking.h"
#include "service/waiting/wait_queue.h"

namespace replayd::service {

struct Command;

class Session : public std::enable_shared_from_this<Session>,
                private Scheduler::Learner,
                private Parking::Connection,
                private WatchedConnection {
 public:
  using Socket = asio::generic::stream_protocol::socket;

  Session(Socket socket, ServiceContext& context);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Before start(): this connection must authenticate with context.auth_token.
  void require_token();
  // Starts the reader and writer coroutines (and the timeout watchdog when enabled).
  void start();
  // Server stopping: stop reading; parked requests answer shutting_down (the caller cancels
  // table waiters first); replies are flushed; then the socket closes.
  void begin_shutdown();

 private:
  // The reader. `handover`: it takes over from a reader whose request suspended, and first
  // handles the bytes that one had read and not consumed (unconsumed_).
  asio::awaitable<void> read_loop(bool handover);
  asio::awaitable<void> write_loop();
  // Suspends until the socket holds bytes, then reads them into `into`. 0 on EOF or error.
  asio::awaitable<std::size_t> read_some(std::span<std::byte> into);
  // Feeds bytes to the decoder and handles every frame they complete, within the budget.
  // Returns early when a handler suspended (this coroutine is no longer the reader).
  asio::awaitable<void> consume(std::span<const std::byte> bytes);
  // Waits while the connection's budget is spent (queued replies, parked payloads); stops
  // reading when the client closes the connection meanwhile.
  asio::awaitable<void> wait_for_budget();
  // Whether the client shut the connection down (POLLRDHUP), even with bytes still unread.
  bool peer_closed();
  // Answers a decode error (the frame boundary is lost) and stops reading.
  void fail_decoding(DecodeError error);
  // Runs one request to its reply (or to no reply, when the connection closed meanwhile).
  asio::awaitable<void> handle(WireFrame frame);
  // Counts the reply of a request of op label `op` read at `received_at`, then send()s.
  void answer(std::size_t op, std::chrono::steady_clock::time_point received_at, Reply reply);
  // Queues the reply for the writer. A reply that borrows table rows is first written
  // straight to the socket when nothing else is queued, and whatever the socket does not
  // take at once is copied (Reply::settle) before send returns.
  void send(Reply reply);
  // Writes as much of `reply` as the socket takes without waiting; returns the bytes
  // written. Only when the outbox is empty, so frames never interleave. A socket error
  // other than would_block marks the write failed and stops reading.
  std::size_t write_now(const Reply& reply);
  // Writes what the socket takes without waiting of buffers[first...], advancing `first`
  // past what was written (a partly written buffer is trimmed); returns the bytes written.
  std::size_t write_available(std::vector<asio::const_buffer>& buffers, std::size_t& first);
  // Writes what the socket takes at once of `reply`, its descriptors with the first byte
  // (they are closed once sent). 0 when the socket takes nothing now; a socket error marks
  // the write failed. Precondition: nothing of the reply was written yet.
  std::size_t write_with_descriptors(Reply& reply);
  void stop_reading();
  bool reading_paused() const;
  // Adds / removes `bytes` of this session's buffers (outbox_bytes_ or parked_bytes_) and
  // of the server's (ServiceContext::buffered_bytes); release wakes paused readers.
  void hold(std::size_t& counter, std::size_t bytes);
  void release(std::size_t& counter, std::size_t bytes);
  // The first request of a connection that must authenticate; false when it was refused.
  bool authenticate(const WireFrame& frame);
  // dispatch's hook: the command is known (its lane, for the scheduler).
  static void command_known(void* session, const Command& command);

  // Scheduler::Learner: a request unread in the socket, or a reply queued.
  bool waits_for_server() const override;
  // Parking::Connection.
  void request_suspends() override;
  void parked_bytes_changed(std::size_t held, bool parked) override;
  // WatchedConnection.
  bool closed() const override { return closed_; }
  bool reading() const override { return reading_; }
  bool quiescent() const override {
    return reading_ && parking_.empty() && outbox_.empty() && !context_.scheduler.holds_turn(this);
  }
  bool replies_queued() const override { return !outbox_.empty(); }
  Clock::time_point last_activity() const override { return last_activity_; }
  Clock::time_point write_waiting_since() const override { return write_waiting_since_; }
  void close_idle(std::chrono::milliseconds idle_timeout) override;
  void close_stuck(std::chrono::milliseconds write_timeout) override;

  Socket socket_;
  ServiceContext& context_;
  std::uint64_t id_ = 0;  // the writer of this connection's episodes (Call::writer)
  FrameDecoder decoder_;
  TokenGuard token_guard_;
  SchedulerAccount account_;
  Parking parking_;
  shm::ConnectionPlane plane_;
  std::deque<Reply> outbox_;
  std::vector<asio::const_buffer> write_now_buffers_;  // scratch of write_now, reused
  std::size_t outbox_bytes_ = 0;
  std::size_t parked_bytes_ = 0;  // held by parked requests (Parking::held_bytes)
  WaitQueue outbox_ready_;        // the writer waits here for replies (or for closing)
  WaitQueue read_resume_;         // the reader waits here while paused by backpressure
  // The reader's buffer, and what of it the reader has not handled yet: a reader that hands
  // over (request_suspends) leaves the rest to the next one.
  std::vector<std::byte> read_chunk_;
  std::span<const std::byte> unconsumed_;
  // Bumped each time reading is handed over: a reader whose number is stale has a suspended
  // request in its frames and only finishes that.
  std::uint64_t reader_ = 0;
  // When the current request's handler started (its synchronous part is charged to the
  // connection when it suspends).
  std::chrono::steady_clock::time_point handle_began_;
  // When the last read from the socket completed: the received time of the requests it
  // completed (request latency metric; one clock read per read, not per request).
  std::chrono::steady_clock::time_point read_at_;
  std::size_t handled_this_turn_ = 0;
  bool reading_ = true;  // false once the reader stopped for good
  bool write_failed_ = false;
  bool closed_ = false;  // the writer finished and the socket is closed
  asio::steady_timer watchdog_;
  // Last complete request, finished write or finished parked request (idle timeout).
  std::chrono::steady_clock::time_point last_activity_ = std::chrono::steady_clock::now();
  // Since when queued replies wait for the kernel to take a byte (write timeout).
  std::chrono::steady_clock::time_point write_waiting_since_;
};

}  // namespace replayd::service
