// Tests of metrics/http_request_parser.*: the pure HTTP request-head parser.
#include "metrics/http_request_parser.h"

#include <catch2/catch.hpp>
#include <string>

using replayd::metrics::HttpRequestLimits;
using replayd::metrics::HttpRequestParser;
using State = HttpRequestParser::State;

namespace {

// Feeds `text` one byte at a time; returns the bytes consumed in total.
std::size_t feed_bytewise(HttpRequestParser& parser, std::string_view text) {
  std::size_t consumed = 0;
  for (char c : text) {
    const std::size_t used = parser.feed(std::string_view(&c, 1));
    consumed += used;
    if (used == 0) break;
  }
  return consumed;
}

}  // namespace

TEST_CASE("a GET request head is parsed whole or byte by byte with the same result") {
  const std::string head =
      "GET /metrics?name=x HTTP/1.1\r\nHost: 127.0.0.1:9700\r\nAccept: text/plain\r\n\r\n";
  for (bool bytewise : {false, true}) {
    HttpRequestParser parser(HttpRequestLimits{});
    const std::size_t consumed = bytewise ? feed_bytewise(parser, head) : parser.feed(head);
    REQUIRE(consumed == head.size());
    REQUIRE(parser.state() == State::complete);
    CHECK(parser.request().method == "GET");
    CHECK(parser.request().target == "/metrics?name=x");
    CHECK(parser.request().path == "/metrics");
    CHECK(parser.request().version_minor == 1);
    CHECK(parser.request().keep_alive);
    CHECK_FALSE(parser.request().has_body);
  }
}

TEST_CASE("bytes after a complete head are left for the next request") {
  const std::string two = "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
  HttpRequestParser parser(HttpRequestLimits{});
  const std::size_t first = parser.feed(two);
  REQUIRE(first == two.size() / 2);
  CHECK(parser.request().path == "/a");
  CHECK(parser.feed(std::string_view(two).substr(first)) == 0);  // nothing until reset
  parser.reset();
  CHECK(parser.feed(std::string_view(two).substr(first)) == two.size() / 2);
  REQUIRE(parser.state() == State::complete);
  CHECK(parser.request().path == "/b");
}

TEST_CASE("an incomplete head stays incomplete and consumes everything it was given") {
  HttpRequestParser parser(HttpRequestLimits{});
  const std::string part = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
  CHECK(parser.feed(part) == part.size());
  CHECK(parser.state() == State::incomplete);
  CHECK(parser.feed("\r\n") == 2);
  CHECK(parser.state() == State::complete);
}

TEST_CASE("connection persistence follows the HTTP version and the Connection header") {
  auto keep_alive_of = [](const std::string& head) {
    HttpRequestParser parser(HttpRequestLimits{});
    parser.feed(head);
    REQUIRE(parser.state() == State::complete);
    return parser.request().keep_alive;
  };
  CHECK(keep_alive_of("GET / HTTP/1.1\r\n\r\n"));
  CHECK_FALSE(keep_alive_of("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
  CHECK_FALSE(keep_alive_of("GET / HTTP/1.1\r\nconnection: Keep-Alive, CLOSE\r\n\r\n"));
  CHECK_FALSE(keep_alive_of("GET / HTTP/1.0\r\n\r\n"));
  CHECK(keep_alive_of("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
}

TEST_CASE("a request that announces a body is marked so the server can close after it") {
  auto has_body_of = [](const std::string& head) {
    HttpRequestParser parser(HttpRequestLimits{});
    parser.feed(head);
    REQUIRE(parser.state() == State::complete);
    return parser.request().has_body;
  };
  CHECK(has_body_of("POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\n"));
  CHECK(has_body_of("POST /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  CHECK_FALSE(has_body_of("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"));
}

TEST_CASE("absolute-form targets and a leading empty line are accepted") {
  HttpRequestParser parser(HttpRequestLimits{});
  const std::string head = "\r\nGET http://localhost:9700/readyz?x HTTP/1.1\r\n\r\n";
  CHECK(parser.feed(head) == head.size());
  REQUIRE(parser.state() == State::complete);
  CHECK(parser.request().path == "/readyz");
}

TEST_CASE("malformed request heads fail with a message naming the problem") {
  struct Case {
    std::string head;
    std::string expected;
  };
  const Case cases[] = {
      {"GET /metrics\r\n\r\n", "METHOD SP TARGET SP HTTP-VERSION"},
      {"GET  /metrics HTTP/1.1\r\n\r\n", "METHOD SP TARGET SP HTTP-VERSION"},
      {"GET /metrics HTTP/2.0\r\n\r\n", "unsupported HTTP version 'HTTP/2.0'"},
      {"GE(T /metrics HTTP/1.1\r\n\r\n", "method 'GE(T' is not a token"},
      {"GET metrics HTTP/1.1\r\n\r\n", "neither a path nor an absolute URI"},
      {"GET /metrics HTTP/1.1\nHost: x\n\n", "bare LF"},
      {"GET /metrics HTTP/1.1\rX\r\n\r\n", "bare CR"},
      {"GET /metrics HTTP/1.1\r\nHost x\r\n\r\n", "has no ':'"},
      {"GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n", "header name 'Host ' is not a token"},
      {"GET /metrics HTTP/1.1\r\nA: b\r\n  folded\r\n\r\n", "obsolete line folding"},
      {"GET /metrics HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
       "Content-Length '1x' is not a number"},
      {"GET /metrics HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
       "conflicting Content-Length"},
      {std::string("GET /metrics HTTP/1.1\r\nA: \x01\r\n\r\n"), "control byte 0x01"},
      {std::string("\x16\x03\x01\x02\x00", 5), "control byte 0x16"},
  };
  for (const Case& c : cases) {
    INFO(c.head);
    HttpRequestParser parser(HttpRequestLimits{});
    parser.feed(c.head);
    REQUIRE(parser.state() == State::failed);
    CHECK_THAT(parser.error(), Catch::Contains(c.expected));
  }
}

TEST_CASE("a binary preamble fails at its first byte, without waiting for more input") {
  HttpRequestParser parser(HttpRequestLimits{});
  const std::string tls_hello("\x16\x03\x01\x02\x00\x01", 6);
  CHECK(parser.feed(tls_hello) == 0);
  CHECK(parser.state() == State::failed);
  CHECK(parser.feed("GET / HTTP/1.1\r\n\r\n") == 0);  // nothing more is accepted
}

TEST_CASE("a head longer than max_request_bytes fails before buffering more than the limit") {
  HttpRequestParser parser(HttpRequestLimits{64, 8});
  const std::string head = "GET /" + std::string(100, 'a') + " HTTP/1.1\r\n\r\n";
  CHECK(parser.feed(head) == 64);
  REQUIRE(parser.state() == State::failed);
  CHECK_THAT(parser.error(), Catch::Contains("larger than 64 bytes"));
}

TEST_CASE("a head of exactly max_request_bytes is accepted") {
  const std::string head = "GET /x HTTP/1.1\r\n\r\n";
  HttpRequestParser parser(HttpRequestLimits{head.size(), 8});
  CHECK(parser.feed(head) == head.size());
  CHECK(parser.state() == State::complete);
}

TEST_CASE("more header fields than max_header_fields fail") {
  std::string head = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 4; ++i)
    head += "X-" + std::to_string(i) + ": v\r\n";
  head += "\r\n";
  HttpRequestParser within(HttpRequestLimits{8192, 4});
  within.feed(head);
  CHECK(within.state() == State::complete);
  HttpRequestParser beyond(HttpRequestLimits{8192, 3});
  beyond.feed(head);
  REQUIRE(beyond.state() == State::failed);
  CHECK_THAT(beyond.error(), Catch::Contains("more than 3 header fields"));
}

TEST_CASE("reset after a failure makes the parser usable again") {
  HttpRequestParser parser(HttpRequestLimits{});
  parser.feed("BAD\r\n\r\n");
  REQUIRE(parser.state() == State::failed);
  parser.reset();
  CHECK(parser.error().empty());
  parser.feed("GET /healthz HTTP/1.1\r\n\r\n");
  REQUIRE(parser.state() == State::complete);
  CHECK(parser.request().path == "/healthz");
}
