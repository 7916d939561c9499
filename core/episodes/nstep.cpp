#include "core/episodes/nstep.h"

#include <cmath>
#include <cstring>

namespace replayd {

double nstep_discount(const NStepWindow& window, double gamma) {
  return window.terminal ? 0.0 : std::pow(gamma, static_cast<double>(window.steps));
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
