// HttpRequestParser: a pure, incremental parser for the head of one HTTP/1.x request (request
// line and header fields, up to the blank line), fed bytes piece by piece. No socket inside;
// limits are given at construction and checked byte by byte, before anything grows past them.
// Threading: one parser per connection; not thread-safe.
//
// Strictness: lines end with CRLF; the request line is exactly METHOD SP TARGET SP VERSION;
// VERSION is HTTP/1.0 or HTTP/1.1; header names are tokens followed directly by ':';
// obsolete line folding, control bytes and bare CR or LF are errors. A request body is not
// parsed: has_body says one was announced (Content-Length > 0 or Transfer-Encoding), and the
// caller answers and closes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace replayd::metrics {

struct HttpRequestLimits {
  std::size_t max_request_bytes = 8192;  // bytes of request line + header fields + blank line
  std::size_t max_header_fields = 64;    // header field lines
};

struct HttpRequest {
  std::string method;      // e.g. "GET", case-sensitive as RFC 9110 says
  std::string target;      // as sent, e.g. "/metrics?x=1"
  std::string path;        // the target's path: no query, no scheme or authority
  int version_minor = 1;   // HTTP/1.<version_minor>
  bool keep_alive = true;  // HTTP/1.1 unless "Connection: close"; 1.0 only with keep-alive
  bool has_body = false;   // Content-Length > 0 or Transfer-Encoding present
};

class HttpRequestParser {
 public:
  enum class State { incomplete, complete, failed };

  explicit HttpRequestParser(HttpRequestLimits limits) : limits_(limits) {}

  // Consumes bytes of the current request head from `input`: up to and including its blank
  // line (state becomes complete), up to the first offending byte (failed), or all of it
  // (still incomplete). Returns the number of bytes consumed; bytes after a complete head
  // belong to the next request. Consumes nothing once complete or failed, until reset().
  // Cost: O(bytes consumed); memory at most max_request_bytes.
  std::size_t feed(std::string_view input);

  State state() const { return state_; }
  // The parsed request. Valid while state() == complete, until reset().
  const HttpRequest& request() const { return request_; }
  // Why parsing failed, naming the problem. Empty unless state() == failed.
  const std::string& error() const { return error_; }
  // Forgets the current request and gets ready for the next one on the same connection.
  void reset();

 private:
  // Appends one byte, or fails (and returns false) if the byte is not allowed there.
  bool accept_byte(char c);
  // Handles the line that the CRLF just appended to head_ ended.
  void end_line();
  void parse_request_line(std::string_view line);
  void parse_header_field(std::string_view line);
  void finish_head();
  void fail(std::string message);

  HttpRequestLimits limits_;
  State state_ = State::incomplete;
  std::string head_;            // bytes of the current head consumed so far
  std::size_t line_start_ = 0;  // offset in head_ of the line being read
  std::size_t lines_ = 0;       // non-empty-prefix lines ended so far (request line first)
  HttpRequest request_;
  std::string error_;
  bool content_length_seen_ = false;
  unsigned long long content_length_ = 0;
  bool connection_close_ = false;       // "Connection: close" seen
  bool connection_keep_alive_ = false;  // "Connection: keep-alive" seen
};

}  // namespace replayd::metrics
