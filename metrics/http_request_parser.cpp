#include "metrics/http_request_parser.h"

#include <algorithm>
#include <cstdio>

namespace replayd::metrics {
namespace {

bool is_token_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= '0' && u <= '9') return true;
  if ((u | 0x20) >= 'a' && (u | 0x20) <= 'z') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_token_char);
}

char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return ascii_lower(x) == ascii_lower(y);
         });
}

std::string_view trim_whitespace(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  return text;
}

// Quotes at most 40 bytes of client text for an error message.
std::string quoted(std::string_view text) {
  constexpr std::size_t kMaxQuoted = 40;
  std::string out;
  out.reserve(kMaxQuoted + 5);
  out.push_back('\'');
  out.append(text.substr(0, kMaxQuoted));
  if (text.size() > kMaxQuoted) out.append("...");
  out.push_back('\'');
  return out;
}

}  // namespace

void HttpRequestParser::reset() {
  state_ = State::incomplete;
  head_.clear();
  line_start_ = 0;
  lines_ = 0;
  request_ = HttpRequest{};
  error_.clear();
  content_length_seen_ = false;
  content_length_ = 0;
  connection_close_ = false;
  connection_keep_alive_ = false;
}

void HttpRequestParser::fail(std::string message) {
  state_ = State::failed;
  error_ = std::move(message);
}

std::size_t HttpRequestParser::feed(std::string_view input) {
  std::size_t consumed = 0;
  while (state_ == State::incomplete && consumed < input.size()) {
    const char c = input[consumed];
    if (!accept_byte(c)) break;  // failed at this byte: it is not consumed
    ++consumed;
  }
  return consumed;
}

bool HttpRequestParser::accept_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (head_.size() >= limits_.max_request_bytes) {
    fail("request head (request line and header fields) larger than " +
         std::to_string(limits_.max_request_bytes) + " bytes");
    return false;
  }
  const bool after_cr = !head_.empty() && head_.back() == '\r';
  if (c == '\n') {
    if (!after_cr) {
      fail("a line ends with a bare LF; HTTP lines end with CRLF");
      return false;
    }
    head_.push_back(c);
    end_line();
    return true;
  }
  if (after_cr) {
    fail("a bare CR inside a line");
    return false;
  }
  if ((u < 0x20 && c != '\t' && c != '\r') || u == 0x7f) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", u);
    fail(std::string("control byte ") + hex + " in the request head");
    return false;
  }
  head_.push_back(c);
  return true;
}

void HttpRequestParser::end_line() {
  const std::string_view line =
      std::string_view(head_).substr(line_start_, head_.size() - 2 - line_start_);
  line_start_ = head_.size();
  if (lines_ == 0 && line.empty()) return;  // RFC 9112 2.2: ignore empty lines before it
  ++lines_;
  if (lines_ == 1) {
    parse_request_line(line);
  } else if (line.empty()) {
    finish_head();
  } else if (lines_ - 1 > limits_.max_header_fields) {
    fail("more than " + std::to_string(limits_.max_header_fields) + " header fields");
  } else {
    parse_header_field(line);
  }
}

void HttpRequestParser::parse_request_line(std::string_view line) {
  const auto first_space = line.find(' ');
  const auto second_space =
      first_space == std::string_view::npos ? first_space : line.find(' ', first_space + 1);
  if (second_space == std::string_view::npos ||
      line.find(' ', second_space + 1) != std::string_view::npos) {
    return fail("request line " + quoted(line) + " is not METHOD SP TARGET SP HTTP-VERSION");
  }
  const std::string_view method = line.substr(0, first_space);
  const std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
  const std::string_view version = line.substr(second_space + 1);
  if (!is_token(method)) return fail("method " + quoted(method) + " is not a token");
  if (target.empty()) return fail("empty request target");
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f)
      return fail("request target " + quoted(target) + " has a non-visible byte");
  }
  if (version == "HTTP/1.1") {
    request_.version_minor = 1;
  } else if (version == "HTTP/1.0") {
    request_.version_minor = 0;
  } else {
    return fail("unsupported HTTP version " + quoted(version) + "; expected HTTP/1.0 or HTTP/1.1");
  }
  std::string_view path;
  if (target.front() == '/') {
    path = target;
  } else if (target == "*") {
    path = target;
  } else if (const auto scheme_end = target.find("://");
             scheme_end != std::string_view::npos &&
             (equals_ignoring_case(target.substr(0, scheme_end), "http") ||
              equals_ignoring_case(target.substr(0, scheme_end), "https"))) {
    const auto path_start = target.find('/', scheme_end + 3);
    path = path_start == std::string_view::npos ? std::string_view("/") : target.substr(path_start);
  } else {
    return fail("request target " + quoted(target) + " is neither a path nor an absolute URI");
  }
  path = path.substr(0, std::min(path.find('?'), path.find('#')));
  request_.method = std::string(method);
  request_.target = std::string(target);
  request_.path = std::string(path.empty() ? std::string_view("/") : path);
}

void HttpRequestParser::parse_header_field(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') {
    return fail("obsolete line folding (a header line starting with whitespace)");
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return fail("header line " + quoted(line) + " has no ':'");
  const std::string_view name = line.substr(0, colon);
  if (!is_token(name)) return fail("header name " + quoted(name) + " is not a token");
  const std::string_view value = trim_whitespace(line.substr(colon + 1));
  if (equals_ignoring_case(name, "content-length")) {
    constexpr std::size_t kMaxDigits = 18;
    if (value.empty() || value.size() > kMaxDigits ||
        !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return fail("Content-Length " + quoted(value) + " is not a number");
    }
    const unsigned long long length = std::stoull(std::string(value));
    if (content_length_seen_ && length != content_length_) {
      return fail("conflicting Content-Length header fields");
    }
    content_length_seen_ = true;
    content_length_ = length;
    if (length > 0) request_.has_body = true;
  } else if (equals_ignoring_case(name, "transfer-encoding")) {
    request_.has_body = true;
  } else if (equals_ignoring_case(name, "connection")) {
    std::string_view rest = value;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view option = trim_whitespace(rest.substr(0, comma));
      if (equals_ignoring_case(option, "close")) connection_close_ = true;
      if (equals_ignoring_case(option, "keep-alive")) connection_keep_alive_ = true;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
}

void HttpRequestParser::finish_head() {
  if (state_ != State::incomplete) return;
  // HTTP/1.1 keeps the connection unless told to close; 1.0 closes unless told to keep it.
  request_.keep_alive =
      !connection_close_ && (request_.version_minor == 1 || connection_keep_alive_);
  state_ = State::complete;
}

}  // namespace replayd::metrics
