// Tests of service/net/handshake_gate.h over a real loopback TCP connection: the gate waits
// for the first request frame without consuming it, and says whether it is hello with the
// token, a refusal, a timeout or a closed connection.
#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "service/net/handshake_gate.h"
#include "service/protocol/wire_frame.h"

using namespace replayd::service;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

constexpr std::uint32_t kMaxMeta = 256;

std::vector<std::byte> frame_of(std::string_view meta, std::uint64_t payload_bytes = 0) {
  std::vector<std::byte> bytes(kHeaderBytes + meta.size() + payload_bytes, std::byte{0});
  encode_header(
      FrameHeader{FrameKind::request, 1, static_cast<std::uint32_t>(meta.size()), payload_bytes},
      std::span<std::byte, kHeaderBytes>(bytes.data(), kHeaderBytes));
  std::memcpy(bytes.data() + kHeaderBytes, meta.data(), meta.size());
  return bytes;
}

// A connected pair over loopback TCP: `client` is the stranger, `server` the accepted side.
struct Connection {
  asio::io_context io;
  tcp::socket client{io};
  tcp::socket server{io};

  Connection() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }

  void send(std::span<const std::byte> bytes) {
    asio::write(client, asio::buffer(bytes.data(), bytes.size()));
  }

  // Runs the gate on `server` until it decides (within `limit`), with `during` run on the
  // io_context meanwhile (e.g. sending the rest of a frame later).
  std::optional<HandshakeVerdict> gate(std::string_view token,
                                       std::chrono::milliseconds deadline_in = 2000ms) {
    std::optional<HandshakeVerdict> verdict;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          verdict = co_await await_hello(server, token, kMaxMeta,
                                         std::chrono::steady_clock::now() + deadline_in);
        },
        [](std::exception_ptr error) {
          if (error) std::rethrow_exception(error);
        });
    return run_until(verdict);
  }

  std::optional<HandshakeVerdict> run_until(std::optional<HandshakeVerdict>& verdict) {
    const auto give_up = std::chrono::steady_clock::now() + 5s;
    while (!verdict && std::chrono::steady_clock::now() < give_up) {
      io.restart();
      io.run_for(2ms);
    }
    return verdict;
  }
};

}  // namespace

TEST_CASE("hello with the right token is authenticated and its bytes stay to be read") {
  Connection connection;
  const auto hello = frame_of(R"({"op":"hello","token":"s3cret"})");
  connection.send(hello);
  CHECK(connection.gate("s3cret") == HandshakeVerdict::authenticated);
  // Nothing was consumed: the session reads the very same frame.
  std::vector<std::byte> read_back(hello.size());
  asio::read(connection.server, asio::buffer(read_back.data(), read_back.size()));
  CHECK(read_back == hello);
}

TEST_CASE("a first request with a wrong token or another op is refused") {
  {
    Connection connection;
    connection.send(frame_of(R"({"op":"hello","token":"guess"})"));
    CHECK(connection.gate("s3cret") == HandshakeVerdict::refused);
  }
  {
    Connection connection;
    connection.send(frame_of(R"({"op":"ping"})"));
    CHECK(connection.gate("s3cret") == HandshakeVerdict::refused);
  }
}

TEST_CASE("a first request larger than header plus max_meta_bytes is refused") {
  Connection connection;
  const std::string long_meta =
      R"({"op":"hello","token":"s3cret","client":")" + std::string(kMaxMeta, 'x') + "\"}";
  connection.send(frame_of(long_meta));
  CHECK(connection.gate("s3cret") == HandshakeVerdict::refused);
}

TEST_CASE("a hello with the token that carries a payload is refused") {
  Connection connection;
  connection.send(frame_of(R"({"op":"hello","token":"s3cret"})", 8));
  CHECK(connection.gate("s3cret") == HandshakeVerdict::refused);
}

TEST_CASE("bytes that are not a frame are refused") {
  Connection connection;
  std::vector<std::byte> garbage(kHeaderBytes, std::byte{'G'});
  connection.send(garbage);
  CHECK(connection.gate("s3cret") == HandshakeVerdict::refused);
}

TEST_CASE("a first request that arrives in pieces is judged once it is complete") {
  Connection connection;
  const auto hello = frame_of(R"({"op":"hello","token":"s3cret"})");
  connection.send(std::span(hello).first(10));
  asio::steady_timer later(connection.io);
  later.expires_after(3ms);
  later.async_wait([&](std::error_code) {
    connection.send(std::span(hello).subspan(10, kHeaderBytes));
    asio::steady_timer* last = new asio::steady_timer(connection.io);
    last->expires_after(3ms);
    last->async_wait([&, last](std::error_code) {
      connection.send(std::span(hello).subspan(10 + kHeaderBytes));
      delete last;
    });
  });
  CHECK(connection.gate("s3cret") == HandshakeVerdict::authenticated);
  std::vector<std::byte> read_back(hello.size());
  asio::read(connection.server, asio::buffer(read_back.data(), read_back.size()));
  CHECK(read_back == hello);
}

TEST_CASE("a connection that sends nothing times out at the deadline") {
  Connection connection;
  const auto started = std::chrono::steady_clock::now();
  CHECK(connection.gate("s3cret", 15ms) == HandshakeVerdict::timed_out);
  CHECK(std::chrono::steady_clock::now() - started >= 15ms);
}

TEST_CASE("a connection that sends only part of its request times out") {
  Connection connection;
  const auto hello = frame_of(R"({"op":"hello","token":"s3cret"})");
  connection.send(std::span(hello).first(kHeaderBytes + 3));
  CHECK(connection.gate("s3cret", 15ms) == HandshakeVerdict::timed_out);
}

TEST_CASE("a peer that closes before sending anything is closed") {
  Connection connection;
  connection.client.close();
  CHECK(connection.gate("s3cret") == HandshakeVerdict::closed);
}

// A peek never reaches the end of the stream while bytes are unread: without a check of its
// own the gate would notice such a peer only at the deadline, holding a pre-authentication
// slot until then.
TEST_CASE("a peer that closes after part of its request is closed, not left to time out") {
  Connection partial;
  const auto hello = frame_of(R"({"op":"hello","token":"s3cret"})");
  partial.send(std::span(hello).first(5));
  partial.client.close();
  const auto verdict = partial.gate("s3cret", 200ms);
  REQUIRE(verdict.has_value());
  INFO("verdict: " << handshake_verdict_name(*verdict));
  CHECK(*verdict == HandshakeVerdict::closed);
}

TEST_CASE("closing the socket while the gate waits ends it as closed") {
  Connection connection;
  std::optional<HandshakeVerdict> verdict;
  asio::co_spawn(
      connection.io,
      [&]() -> asio::awaitable<void> {
        verdict = co_await await_hello(connection.server, "s3cret", kMaxMeta,
                                       std::chrono::steady_clock::now() + 5s);
      },
      [](std::exception_ptr error) {
        if (error) std::rethrow_exception(error);
      });
  connection.io.poll();
  CHECK_FALSE(verdict.has_value());
  connection.server.close();
  CHECK(connection.run_until(verdict) == HandshakeVerdict::closed);
}

TEST_CASE("every verdict has a name for the log") {
  CHECK(std::string(handshake_verdict_name(HandshakeVerdict::authenticated)) == "authenticated");
  CHECK(std::string(handshake_verdict_name(HandshakeVerdict::refused)) == "refused");
  CHECK(std::string(handshake_verdict_name(HandshakeVerdict::timed_out)) == "timed out");
  CHECK(std::string(handshake_verdict_name(HandshakeVerdict::closed)) == "closed");
}
