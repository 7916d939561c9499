// Numbers in error messages: the shortest text that reads back as the same double
// ("-1e-300", "1.0000000000000002", "1000000", "NaN", "inf"), where std::to_string prints six decimals
// and turns -1e-300 into "-0.000000". Pure.
#pragma once

#include <charconv>
#include <cmath>
#include <string>

namespace replayd {

inline std::string number_text(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // The shortest text that reads back exactly; plain digits when they are barely longer
  // (1000000 rather than 1e+06).
  char shortest[32], fixed[400];
  const auto general = std::to_chars(shortest, shortest + sizeof(shortest), value);
  const auto plain = std::to_chars(fixed, fixed + sizeof(fixed), value, std::chars_format::fixed);
  if (general.ec != std::errc{}) return std::to_string(value);
  const auto general_size = general.ptr - shortest;
  if (plain.ec == std::errc{} && plain.ptr - fixed <= general_size + 3) {
    return std::string(fixed, plain.ptr);
  }
  return std::string(shortest, general.ptr);
}

}  // namespace replayd
