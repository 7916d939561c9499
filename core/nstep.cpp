#include "core/nstep.h"

#include <cmath>
#include <cstring>

namespace replayd {

NStepWindow nstep_window(const Episode& episode, std::uint32_t position, std::uint32_t k) {
  NStepWindow window;
  const std::uint64_t left = std::uint64_t{episode.length} - position;
  if (episode.ended() && left <= k) {
    window.steps = static_cast<std::uint32_t>(left);
    window.terminal = episode.state == EpisodeState::terminated;
  } else {
    window.steps = k;
  }
  return window;
}

double nstep_discount(const NStepWindow& window, double gamma) {
  return window.terminal ? 0.0 : std::pow(gamma, static_cast<double>(window.steps));
}

double read_reward(const std::byte* cell, DType dtype) {
  if (dtype == DType::float64) {
    double value;
    std::memcpy(&value, cell, sizeof value);
    return value;
  }
  float value;
  std::memcpy(&value, cell, sizeof value);
  return value;
}

void write_reward(std::byte* cell, DType dtype, double value) {
  if (dtype == DType::float64) {
    std::memcpy(cell, &value, sizeof value);
    return;
  }
  const auto narrow = static_cast<float>(value);
  std::memcpy(cell, &narrow, sizeof narrow);
}

}  // namespace replayd
