// HttpServer: a small HTTP/1.1 server on the io_context that serves the metrics and health
// endpoints. It only accepts and spawns; one coroutine per connection reads request heads
// (HttpRequestParser), asks the handler for a response and writes it. Keep-alive is honoured;
// a malformed or oversized request is answered 400 and the connection closed; a request
// announcing a body is answered and the connection closed (the body is never read).
// Slow clients cannot starve /healthz: a request head must arrive whole within
// header_timeout_ms of when the server starts waiting for it (accept, or the previous
// reply), however its bytes trickle; and when max_connections are open, a new connection
// closes the one that has waited longest for its request head (a connection writing a reply
// is never closed for another; if every one is, the new connection is closed instead).
// Threading: io_context thread only; the handler runs on that thread.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "metrics/http_request_parser.h"

namespace replayd::metrics {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> extra_headers;  // e.g. {"Allow", "GET"}
};

// Called for each complete request; must not suspend. An exception becomes a 500 reply.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerLimits {
  HttpRequestLimits request;         // per request head
  std::size_t max_connections = 64;  // open HTTP connections; then the oldest waiting closes
  // A request head must arrive whole within this long of when the server starts waiting
  // for it (so an idle keep-alive connection also closes after it).
  std::chrono::milliseconds header_timeout_ms{5000};
  // A reply must be written within this long.
  std::chrono::milliseconds write_timeout_ms{30000};
};

class HttpServer {
 public:
  HttpServer(asio::io_context& io, HttpServerLimits limits, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens on `endpoint` (port 0 picks a free port). On error nothing listens and
  // the message names the address and the reason.
  Status open(const asio::ip::tcp::endpoint& endpoint);
  // "host:port" actually bound (IPv6 as "[::1]:port"); empty before open().
  const std::string& address() const { return address_; }
  // Starts the accept loop. Precondition: open() succeeded.
  void start();
  // Stops accepting and closes every open HTTP connection. Idempotent.
  void close();

 private:
  struct Shared;
  struct Connection;
  asio::awaitable<void> accept_loop();
  static asio::awaitable<void> serve(std::shared_ptr<Shared> shared, asio::ip::tcp::socket socket);

  asio::io_context& io_;
  std::optional<asio::ip::tcp::acceptor> acceptor_;
  std::shared_ptr<Shared> shared_;  // also held by every connection coroutine
  std::string address_;
};

// "HTTP/1.1 <status> <reason>" reason phrases for the statuses this server sends.
const char* http_reason_phrase(int status);

}  // namespace replayd::metrics
