#include "core/result.h"

namespace replayd {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::not_found:
      return "not_found";
    case ErrorCode::already_exists:
      return "already_exists";
    case ErrorCode::would_block:
      return "would_block";
    case ErrorCode::resource_exhausted:
      return "resource_exhausted";
    case ErrorCode::failed_precondition:
      return "failed_precondition";
    case ErrorCode::unavailable:
      return "unavailable";
    case ErrorCode::permission_denied:
      return "permission_denied";
  }
  return "unknown";
}

}  // namespace replayd
