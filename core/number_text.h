// Numbers in error messages: the shortest text that reads back as the same double
// ("-1e-300", "1.0000000000000002", "NaN", "inf"), where std::to_string prints six decimals
// and turns -1e-300 into "-0.000000". Pure.
#pragma once

#include <charconv>
#include <cmath>
#include <string>

namespace replayd {

inline std::string number_text(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof(text), value);
  return error == std::errc{} ? std::string(text, end) : std::to_string(value);
}

}  // namespace replayd
