// Session: one client connection. It owns the socket and nothing about operations: a reader
// coroutine decodes request frames and hands each to the command runner
// (service/commands/command_runner.h); a writer coroutine sends queued replies with gathered writes;
// each request that must wait is parked as its own coroutine in `admit` (service/commands/admission.h),
// so it never holds up the requests behind it.
// Lifetime: held by shared_ptr from each of its coroutines; it ends when the last one does.
// Threading: io_context thread only.
//
// Backpressure: before each frame it handles, the reader checks the connection's budget and
// waits while queued reply bytes exceed max_queued_reply_bytes or parked requests hold more
// than max_frame_bytes of payload; the socket's flow control then slows the client. It
// handles at most limits.requests_per_turn frames before letting other connections run.
// Scheduling: an explorer connection yields to waiting learners (service/scheduler.h).
// Closing: on EOF, a read/write error or a framing error, parked requests are cancelled
// (removed from their tables' queues, no reply), queued replies are flushed, and the socket
// is closed. begin_shutdown() instead answers parked requests with shutting_down first.
// When the Session ends, the episodes it opened and did not end end as truncated.
// Timeouts (a watchdog coroutine, one timer per connection): no complete request for
// limits.idle_timeout_ms while nothing waits or is queued: a `timeout` error with request id
// 0, then close. Queued replies of which no byte could be written for
// limits.write_timeout_ms (the client stopped reading): the socket is closed at once and the
// replies dropped.
// Authentication: after require_token(), the first request must be hello with the server's
// token; anything else gets `unauthenticated` and the connection closes. Until then frames
// may not exceed header + max_meta_bytes (no payload is allocated for a stranger).
#pragma once

#include <asio/awaitable.hpp>
#include <asio/generic/stream_protocol.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <unordered_set>

#include "service/commands/command_runner.h"
#include "service/protocol/wire_frame.h"
#include "service/protocol/reply.h"
#include "service/scheduler.h"
#include "service/service_context.h"
#include "service/commands/wait_queue.h"

namespace replayd::service {

class Session : public std::enable_shared_from_this<Session>, private Scheduler::Learner {
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
  asio::awaitable<void> read_loop();
  asio::awaitable<void> write_loop();
  asio::awaitable<void> watch_timeouts();
  // Suspends until `waiting` is admitted (or ends otherwise), then answers it.
  asio::awaitable<void> wait_then_answer(Waiting waiting, std::size_t op,
                                         std::chrono::steady_clock::time_point received_at);
  // Suspends until the socket holds bytes, then reads them into `into`. 0 on EOF or error.
  asio::awaitable<std::size_t> read_some(std::span<std::byte> into);

  // Feeds bytes to the decoder and handles every frame they complete, within the budget.
  asio::awaitable<void> consume(std::span<const std::byte> bytes);
  // Waits while the connection's budget is spent (queued replies, parked payloads); stops
  // reading when the client closes the connection meanwhile.
  asio::awaitable<void> wait_for_budget();
  // Whether the client shut the connection down (POLLRDHUP), even with bytes still unread.
  bool peer_closed();
  // Answers a decode error (the frame boundary is lost) and stops reading.
  void fail_decoding(DecodeError error);
  void handle(Frame frame);
  // Counts the reply of a request of op label `op` read at `received_at`, then send()s.
  void answer(std::size_t op, std::chrono::steady_clock::time_point received_at, Reply reply);
  // Scheduler::Learner: a request unread in the socket, parked, or a reply queued.
  bool waits_for_server() const override;
  // Counts `bytes` moved for this connection for the scheduler.
  void moved(std::uint64_t bytes);
  void become_learner();
  // Queues the reply for the writer. A reply that borrows table rows is first written
  // straight to the socket when nothing else is queued, and whatever the socket does not
  // take at once is copied (Reply::settle) before send returns.
  void send(Reply reply);
  // Writes as much of `reply` as the socket takes without waiting; returns the bytes
  // written. Only when the outbox is empty, so frames never interleave. A socket error
  // other than would_block marks the write failed and stops reading. Counts the bytes
  // written for the scheduler (moved()).
  std::size_t write_now(const Reply& reply);
  // Writes what the socket takes without waiting of buffers[first...], advancing `first`
  // past what was written (a partly written buffer is trimmed); returns the bytes written.
  // Errors as write_now.
  std::size_t write_available(std::vector<asio::const_buffer>& buffers, std::size_t& first);
  // Charges `spent` of the thread's time to this connection's lane (Scheduler).
  void worked(std::chrono::steady_clock::duration spent);
  void stop_reading();
  bool reading_paused() const;
  // Adds / removes `bytes` of this session's buffers (outbox_bytes_ or parked_bytes_) and
  // of the server's (ServiceContext::buffered_bytes); release wakes paused readers.
  void hold(std::size_t& counter, std::size_t bytes);
  void release(std::size_t& counter, std::size_t bytes);
  // The first request of a connection that must authenticate; false when it was refused.
  bool authenticate(const Frame& frame);

  Socket socket_;
  ServiceContext& context_;
  std::uint64_t id_ = 0;  // the writer of this connection's episodes (Call::writer)
  FrameDecoder decoder_;
  std::deque<Reply> outbox_;
  std::vector<asio::const_buffer> write_now_buffers_;  // scratch of write_now, reused
  std::size_t outbox_bytes_ = 0;
  WaitQueue outbox_ready_;  // the writer waits here for replies (or for closing)
  WaitQueue read_resume_;   // the reader waits here while paused by backpressure
  // When the last read from the socket completed: the received time of the requests it
  // completed (request latency metric; one clock read per read, not per request).
  std::chrono::steady_clock::time_point read_at_;
  std::unordered_set<WaitQueue::Waiter*> parked_;
  std::size_t parked_bytes_ = 0;  // payload bytes held by parked requests
  Lane lane_ = Lane::control;     // explorer once it inserts, learner once it samples
  std::size_t handled_this_turn_ = 0;
  bool reading_ = true;  // false once the reader stopped for good
  bool write_failed_ = false;
  bool authenticated_ = true;  // false until hello with the token, after require_token()
  bool closed_ = false;        // the writer finished and the socket is closed
  asio::steady_timer watchdog_;
  // Last complete request, finished write or finished parked request (idle timeout).
  std::chrono::steady_clock::time_point last_activity_ = std::chrono::steady_clock::now();
  // Since when queued replies wait for the kernel to take a byte (write timeout).
  std::chrono::steady_clock::time_point write_waiting_since_;
};

}  // namespace replayd::service
