// LogThrottle: keeps a repeated log line (an accept error at the descriptor limit, a refused
// connection) from flooding the log. The first occurrence is logged; later ones within
// `window` of the last logged line are only counted, and the first occurrence after the
// window is logged with a summary: "(N more in the last X s)".
// One LogThrottle per kind of line. Not thread-safe: io_context thread only. No allocation
// except the summary string.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace replayd::metrics {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kDefaultWindow = std::chrono::seconds(10);

  explicit LogThrottle(Clock::duration window = kDefaultWindow) : window_(window) {}

  // What to append to a line that is logged now.
  struct Line {
    std::uint64_t suppressed = 0;  // occurrences not logged since the previous line
    Clock::duration over{};        // since the previous logged line
    // "" when nothing was suppressed, else " (N more in the last X s)".
    std::string suffix() const {
      if (suppressed == 0) return {};
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(over).count();
      return " (" + std::to_string(suppressed) + " more in the last " + std::to_string(seconds) +
             " s)";
    }
  };

  // Records one occurrence at `now`: the Line to log, or nullopt to stay quiet. O(1).
  std::optional<Line> occur(Clock::time_point now = Clock::now()) {
    if (logged_once_ && now - last_logged_ < window_) {
      ++suppressed_;
      return std::nullopt;
    }
    Line line{suppressed_, logged_once_ ? now - last_logged_ : Clock::duration{}};
    logged_once_ = true;
    last_logged_ = now;
    suppressed_ = 0;
    return line;
  }

 private:
  Clock::duration window_;
  bool logged_once_ = false;
  Clock::time_point last_logged_{};
  std::uint64_t suppressed_ = 0;
};

}  // namespace replayd::metrics
