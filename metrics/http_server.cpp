#include "metrics/http_server.h"

#include <spdlog/spdlog.h>
#include <array>
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <unordered_set>

#include "metrics/log_throttle.h"

namespace replayd::metrics {
namespace {

using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
constexpr auto as_tuple = asio::experimental::as_tuple(asio::use_awaitable);
constexpr std::size_t kReadChunkBytes = 4096;
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
// After an error reply, unread request bytes are drained (up to this much, for at most this
// long) before closing, so that the client reads the reply instead of a connection reset.
constexpr std::size_t kMaxDrainBytes = 64 << 10;
constexpr std::chrono::milliseconds kDrainTimeout{1000};

void log_coroutine_exit(std::exception_ptr error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    spdlog::error("metrics http coroutine failed: {}", e.what());
  }
}

std::string serialize(const HttpResponse& response, bool keep_alive, bool include_body) {
  std::string out;
  out.reserve(160 + response.body.size());
  out += "HTTP/1.1 ";
  out += std::to_string(response.status);
  out += ' ';
  out += http_reason_phrase(response.status);
  out += "\r\nContent-Type: ";
  out += response.content_type;
  out += "\r\nContent-Length: ";
  out += std::to_string(response.body.size());
  out += keep_alive ? "\r\nConnection: keep-alive" : "\r\nConnection: close";
  for (const auto& [name, value] : response.extra_headers) {
    out += "\r\n";
    out += name;
    out += ": ";
    out += value;
  }
  out += "\r\n\r\n";
  if (include_body) out += response.body;
  return out;
}

HttpResponse bad_request(const std::string& reason) {
  return HttpResponse{400, "text/plain; charset=utf-8", "bad request: " + reason + "\n", {}};
}

}  // namespace

const char* http_reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

struct HttpServer::Shared {
  HttpServerLimits limits;
  HttpHandler handler;
  std::unordered_set<Connection*> connections;
  bool closed = false;
  LogThrottle evictions_logged;
  LogThrottle refusals_logged;
  LogThrottle accept_errors_logged;

  // Closes the connection that has waited longest for its request head, to make room for
  // a new one; false when every open connection is writing a reply. O(connections).
  bool evict_oldest_waiting();
};

// One open connection, registered with the server for its coroutine's lifetime.
struct HttpServer::Connection {
  Connection(std::shared_ptr<Shared> shared, tcp::socket* socket)
      : shared(std::move(shared)), socket(socket) {
    this->shared->connections.insert(this);
  }
  ~Connection() { shared->connections.erase(this); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  std::shared_ptr<Shared> shared;  // keeps the registry alive
  tcp::socket* socket;             // null once closed by evict_oldest_waiting()
  bool waiting_for_head = true;    // false while a reply is made and written
  std::chrono::steady_clock::time_point waiting_since = std::chrono::steady_clock::now();
};

bool HttpServer::Shared::evict_oldest_waiting() {
  Connection* oldest = nullptr;
  for (Connection* connection : connections) {
    if (connection->waiting_for_head &&
        (!oldest || connection->waiting_since < oldest->waiting_since)) {
      oldest = connection;
    }
  }
  if (!oldest) return false;
  asio::error_code ignored;
  oldest->socket->close(ignored);  // its coroutine's read fails; it unregisters itself
  connections.erase(oldest);
  oldest->socket = nullptr;
  return true;
}

HttpServer::HttpServer(asio::io_context& io, HttpServerLimits limits, HttpHandler handler)
    : io_(io), shared_(std::make_shared<Shared>()) {
  shared_->limits = limits;
  shared_->handler = std::move(handler);
}

HttpServer::~HttpServer() {
  close();
}

Status HttpServer::open(const tcp::endpoint& endpoint) {
  const std::string wanted =
      (endpoint.address().is_v6() ? "[" + endpoint.address().to_string() + "]"
                                  : endpoint.address().to_string()) +
      ":" + std::to_string(endpoint.port());
  asio::error_code ec;
  tcp::acceptor acceptor(io_);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return make_error(ErrorCode::invalid_argument,
                      "cannot listen for metrics on " + wanted + ": " + ec.message());
  }
  const auto bound = acceptor.local_endpoint();
  address_ = (bound.address().is_v6() ? "[" + bound.address().to_string() + "]"
                                      : bound.address().to_string()) +
             ":" + std::to_string(bound.port());
  acceptor_.emplace(std::move(acceptor));
  return Ok{};
}

void HttpServer::start() {
  asio::co_spawn(io_, accept_loop(), log_coroutine_exit);
}

void HttpServer::close() {
  if (shared_->closed) return;
  shared_->closed = true;
  asio::error_code ignored;
  if (acceptor_) acceptor_->close(ignored);
  for (Connection* connection : shared_->connections)
    connection->socket->close(ignored);
}

asio::awaitable<void> HttpServer::accept_loop() {
  auto executor = co_await asio::this_coro::executor;
  auto shared = shared_;
  asio::steady_timer retry(executor);
  while (!shared->closed && acceptor_->is_open()) {
    auto [ec, socket] = co_await acceptor_->async_accept(as_tuple);
    if (shared->closed) break;
    if (ec) {
      if (auto line = shared->accept_errors_logged.occur()) {
        spdlog::warn("metrics accept failed: {}; retrying in {} ms{}", ec.message(),
                     kAcceptRetryDelay.count(), line->suffix());
      }
      retry.expires_after(kAcceptRetryDelay);
      co_await retry.async_wait(as_tuple);
      continue;
    }
    if (shared->connections.size() >= shared->limits.max_connections) {
      if (shared->evict_oldest_waiting()) {
        if (auto line = shared->evictions_logged.occur()) {
          spdlog::warn(
              "metrics: {} HTTP connections open (max); closed the one waiting longest for "
              "its request head{}",
              shared->limits.max_connections, line->suffix());
        }
      } else {
        if (auto line = shared->refusals_logged.occur()) {
          spdlog::warn("metrics connection refused: {} HTTP connections are writing replies{}",
                       shared->connections.size(), line->suffix());
        }
        asio::error_code ignored;
        socket.close(ignored);
        continue;
      }
    }
    asio::co_spawn(executor, serve(shared, std::move(socket)), log_coroutine_exit);
  }
}

asio::awaitable<void> HttpServer::serve(std::shared_ptr<Shared> shared, tcp::socket socket) {
  Connection connection(shared, &socket);
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  HttpRequestParser parser(shared->limits.request);
  std::array<char, kReadChunkBytes> chunk;
  std::string pending;  // bytes read but not yet fed to the parser; at most one chunk
  bool drain_before_close = false;
  // A request head must arrive whole within header_timeout_ms of the previous reply (or of
  // the accept), however slowly its bytes trickle in.
  auto request_deadline = connection.waiting_since + shared->limits.header_timeout_ms;

  while (!shared->closed && connection.socket) {
    pending.erase(0, parser.feed(pending));
    if (parser.state() == HttpRequestParser::State::incomplete) {
      timer.expires_at(request_deadline);
      auto read = co_await (socket.async_read_some(asio::buffer(chunk), as_tuple) ||
                            timer.async_wait(as_tuple));
      if (read.index() == 1) break;  // the head took too long
      auto [ec, n] = std::get<0>(read);
      if (ec || !connection.socket) break;  // closed, or evicted for a newer connection
      pending.assign(chunk.data(), n);
      continue;
    }
    connection.waiting_for_head = false;
    HttpResponse response;
    bool keep_alive = false;
    bool include_body = true;
    if (parser.state() == HttpRequestParser::State::failed) {
      response = bad_request(parser.error());
      drain_before_close = true;
    } else {
      const HttpRequest& request = parser.request();
      try {
        response = shared->handler(request);
      } catch (const std::exception& e) {
        spdlog::error("metrics endpoint {} failed: {}", request.path, e.what());
        response = HttpResponse{500, "text/plain; charset=utf-8", "internal error\n", {}};
      }
      keep_alive = request.keep_alive && !request.has_body;
      drain_before_close = request.has_body;
      include_body = request.method != "HEAD";
    }
    const std::string bytes = serialize(response, keep_alive, include_body);
    timer.expires_after(shared->limits.write_timeout_ms);
    auto written = co_await (asio::async_write(socket, asio::buffer(bytes), as_tuple) ||
                             timer.async_wait(as_tuple));
    if (written.index() == 1 || std::get<0>(std::get<0>(written))) break;
    if (!keep_alive) break;
    parser.reset();
    connection.waiting_for_head = true;
    connection.waiting_since = std::chrono::steady_clock::now();
    request_deadline = connection.waiting_since + shared->limits.header_timeout_ms;
  }

  asio::error_code ignored;
  if (drain_before_close && connection.socket && socket.is_open()) {
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    std::size_t drained = 0;
    timer.expires_after(kDrainTimeout);
    while (drained < kMaxDrainBytes && socket.is_open()) {
      auto read = co_await (socket.async_read_some(asio::buffer(chunk), as_tuple) ||
                            timer.async_wait(as_tuple));
      if (read.index() == 1 || std::get<0>(std::get<0>(read))) break;
      drained += std::get<1>(std::get<0>(read));
    }
  }
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

}  // namespace replayd::metrics
