// Tests of metrics/http_server.*: the HTTP server over real loopback sockets.
#include "metrics/http_server.h"

#include <asio/connect.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

using namespace std::chrono_literals;
using asio::ip::tcp;
using replayd::metrics::HttpRequest;
using replayd::metrics::HttpResponse;
using replayd::metrics::HttpServer;
using replayd::metrics::HttpServerLimits;

namespace {

// An HttpServer on 127.0.0.1:<free port> served by its own thread for the test's lifetime.
class RunningServer {
 public:
  explicit RunningServer(HttpServerLimits limits)
      : server_(io_, limits, [](const HttpRequest& request) {
          return HttpResponse{200, "text/plain", "path " + request.path + "\n", {}};
        }) {
    REQUIRE(server_.open(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)));
    server_.start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~RunningServer() {
    io_.stop();
    thread_.join();
  }
  std::uint16_t port() const {
    return static_cast<std::uint16_t>(
        std::stoi(server_.address().substr(server_.address().rfind(':') + 1)));
  }

 private:
  asio::io_context io_;
  HttpServer server_;
  std::thread thread_;
};

tcp::socket connect_to(asio::io_context& io, std::uint16_t port) {
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  return socket;
}

// Reads until the server closes the connection.
std::string read_all(tcp::socket& socket) {
  std::string out;
  char buffer[4096];
  asio::error_code ec;
  while (true) {
    const std::size_t n = socket.read_some(asio::buffer(buffer), ec);
    if (ec) break;
    out.append(buffer, n);
  }
  return out;
}

}  // namespace

TEST_CASE("the bound address names the port the system picked") {
  RunningServer server(HttpServerLimits{});
  CHECK(server.port() != 0);
}

TEST_CASE("a request head that trickles in slower than header_timeout_ms is cut off") {
  HttpServerLimits limits;
  limits.header_timeout_ms = 300ms;
  RunningServer server(limits);
  asio::io_context client_io;
  tcp::socket client = connect_to(client_io, server.port());
  const auto started = std::chrono::steady_clock::now();
  const std::string head = "GET /metrics HTTP/1.1\r\nX-Slow: " + std::string(200, 'a');
  asio::error_code ec;
  for (char c : head) {
    asio::write(client, asio::buffer(&c, 1), ec);
    if (ec) break;
    std::this_thread::sleep_for(20ms);  // each byte well within the timeout, the head not
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  CHECK(ec);  // the server closed the connection before the head was complete
  CHECK(elapsed >= 250ms);
  CHECK(elapsed < 3s);
}

TEST_CASE("a keep-alive connection serves request after request, then closes on request") {
  RunningServer server(HttpServerLimits{});
  asio::io_context client_io;
  tcp::socket client = connect_to(client_io, server.port());
  const std::string requests =
      "GET /a HTTP/1.1\r\n\r\nGET /b?q=1 HTTP/1.1\r\n\r\nGET /c HTTP/1.1\r\nConnection: "
      "close\r\n\r\n";
  asio::write(client, asio::buffer(requests));
  const std::string replies = read_all(client);
  const auto a = replies.find("path /a\n");
  const auto b = replies.find("path /b\n");
  const auto c = replies.find("path /c\n");
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  REQUIRE(c != std::string::npos);
  CHECK((a < b && b < c));
  CHECK(replies.find("Connection: close") != std::string::npos);
}

TEST_CASE("at max_connections a new connection closes the one waiting longest for its head") {
  HttpServerLimits limits;
  limits.max_connections = 2;
  RunningServer server(limits);
  asio::io_context client_io;
  tcp::socket oldest = connect_to(client_io, server.port());
  asio::write(oldest, asio::buffer(std::string("GET /slow HTTP/1.1\r\nX-A: ")));
  std::this_thread::sleep_for(50ms);
  tcp::socket younger = connect_to(client_io, server.port());
  asio::write(younger, asio::buffer(std::string("GET /slow HTTP/1.1\r\nX-B: ")));
  std::this_thread::sleep_for(50ms);
  tcp::socket probe = connect_to(client_io, server.port());
  asio::write(probe,
              asio::buffer(std::string("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")));
  CHECK(read_all(probe).find("path /healthz") != std::string::npos);
  CHECK(read_all(oldest).empty());  // evicted without a reply
  // The younger one is still open: it completes its request and is served.
  asio::write(younger, asio::buffer(std::string("b\r\nConnection: close\r\n\r\n")));
  CHECK(read_all(younger).find("path /slow") != std::string::npos);
}
