// Session: one client connection. It owns its socket; a reader coroutine decodes request
// frames and executes them in order; a writer coroutine sends queued replies with gathered
// writes; each request that must wait (rate limiter) runs as its own coroutine parked on
// the table's WaitQueue, so it never holds up the requests behind it.
// Lifetime: held by shared_ptr from each of its coroutines; it ends when the last one does.
// Threading: io_context thread only.
//
// Backpressure: the reader stops reading while queued reply bytes exceed
// max_queued_reply_bytes; the socket's flow control then slows the client.
// Closing: on EOF, a read/write error or a framing error, parked requests are cancelled
// (removed from their tables' queues, no reply), queued replies are flushed, and the socket
// is closed. begin_shutdown() instead answers parked requests with shutting_down first.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/generic/stream_protocol.hpp>
#include <deque>
#include <memory>
#include <unordered_set>

#include "service/dispatch.h"
#include "service/frame.h"
#include "service/reply.h"
#include "service/service_context.h"
#include "service/wait_queue.h"

namespace replayd::service {

class Session : public std::enable_shared_from_this<Session> {
 public:
  using Socket = asio::generic::stream_protocol::socket;

  Session(Socket socket, ServiceContext& context);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Starts the reader and writer coroutines.
  void start();
  // Server stopping: stop reading; parked requests answer shutting_down (the caller cancels
  // table waiters first); replies are flushed; then the socket closes.
  void begin_shutdown();

 private:
  asio::awaitable<void> read_loop();
  asio::awaitable<void> write_loop();
  asio::awaitable<void> wait_then_insert(PreparedInsert insert);
  asio::awaitable<void> wait_then_sample(PreparedSample sample);

  // Feeds bytes to the decoder and handles every frame they complete.
  void consume(std::span<const std::byte> bytes);
  void handle(Frame frame);
  void handle_insert(PreparedInsert insert);
  void handle_sample(PreparedSample sample);
  // False (after answering resource_exhausted) when the connection may park no more requests.
  bool may_park(metrics::RequestOp op, std::uint64_t request_id,
                std::chrono::steady_clock::time_point received_at);
  // Counts the reply of a request of `op` read at `received_at` in the metrics, then send()s.
  void answer(metrics::RequestOp op, std::chrono::steady_clock::time_point received_at,
              Reply reply);
  void send(Reply reply);
  void stop_reading();
  bool reading_paused() const;

  Socket socket_;
  ServiceContext& context_;
  FrameDecoder decoder_;
  std::deque<Reply> outbox_;
  std::size_t outbox_bytes_ = 0;
  WaitQueue outbox_ready_;  // the writer waits here for replies (or for closing)
  WaitQueue read_resume_;   // the reader waits here while paused by backpressure
  std::unordered_set<WaitQueue::Waiter*> parked_;
  bool reading_ = true;     // false once the reader stopped for good
  bool write_failed_ = false;
};

}  // namespace replayd::service
