// Error: the one exception type of the replayd C++ client. It carries the server's wire
// error code and message unchanged, or a client-side code (connection_lost, bad_reply) for
// problems the client detects itself. Immutable; safe to copy between threads.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace replayd::client {

enum class ErrorCode {
  invalid_argument,    // the request was well framed but wrong (also bad client arguments)
  not_found,           // the named table does not exist (or was dropped while waiting)
  already_exists,      // create_table of a name in use with another description
  timeout,             // a waiting sample or insert reached its timeout_ms
  resource_exhausted,  // a server limit would be exceeded
  shutting_down,       // the server is stopping; the request was not executed
  protocol_error,      // the server saw broken framing (it closes the connection)
  unauthenticated,     // the server requires a token in hello (it closes the connection)
  permission_denied,   // this connection may not do it (shared memory over TCP, another uid)
  connection_lost,     // client side: the connection failed or closed before the reply
  bad_reply,           // client side: a reply that does not follow docs/PROTOCOL.md
  data_loss,           // client side: a stored value that does not decode (corrupt frame)
  unknown              // a wire code this client does not know
};

// The wire spelling ("invalid_argument", ...); client-side codes have names too.
std::string_view error_code_name(ErrorCode code);
// The code for a wire spelling; unknown for anything else.
ErrorCode parse_error_code(std::string_view name);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message);

  ErrorCode code() const noexcept { return code_; }
  // The server's message (or the client's, for client-side errors), without the code.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  std::string message_;
};

}  // namespace replayd::client
