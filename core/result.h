// Result<T>: a value or an Error, shaped like C++23 std::expected (g++ 12 lacks it in
// C++20 mode). Every fallible core operation returns one; nothing in core/ throws on bad
// input. Error messages name the thing that is wrong (field, key, parameter).
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace replayd {

// One error enum for the engine. The service maps each code to a wire error code in one
// place (the codec); `would_block` never reaches the wire: it tells the service to wait.
enum class ErrorCode {
  invalid_argument,     // the request or configuration is malformed or out of range
  not_found,            // a named table or field does not exist
  already_exists,       // a table with this name exists
  would_block,          // the rate limiter or min size does not allow this yet
  resource_exhausted,   // a limit (capacity, memory, batch size) would be exceeded
  failed_precondition,  // the operation can never succeed in the table's current configuration
  unavailable,          // the service cannot do it now (it is shutting down)
  permission_denied     // this connection may not do it (e.g. map shared memory over TCP)
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;
};

template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}
  Result(Error error) : state_(std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, Error> state_;
};

// Result of an operation that yields nothing but success or an Error.
struct Ok {};
using Status = Result<Ok>;

inline Error make_error(ErrorCode code, std::string message) {
  return Error{code, std::move(message)};
}

}  // namespace replayd

// Unwraps a Result into `lhs` or returns its Error from the enclosing function, which must
// return a Result or Status.
#define REPLAYD_CONCAT_INNER(a, b) a##b
#define REPLAYD_CONCAT(a, b) REPLAYD_CONCAT_INNER(a, b)
#define REPLAYD_ASSIGN_OR_RETURN(lhs, expr)                   \
  auto REPLAYD_CONCAT(replayd_result_, __LINE__) = (expr);    \
  if (!REPLAYD_CONCAT(replayd_result_, __LINE__)) {           \
    return REPLAYD_CONCAT(replayd_result_, __LINE__).error(); \
  }                                                           \
  lhs = std::move(REPLAYD_CONCAT(replayd_result_, __LINE__)).value()
#define REPLAYD_RETURN_IF_ERROR(expr)                      \
  do {                                                     \
    if (auto replayd_status_ = (expr); !replayd_status_) { \
      return replayd_status_.error();                      \
    }                                                      \
  } while (0)
