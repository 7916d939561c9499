// n-step windows of an episodic table: which steps a draw at position p covers, and the
// reward arithmetic (returns accumulate in double, then are stored in the reward field's
// dtype). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/episode_index.h"

namespace replayd {

// The window of an n-step draw at `position` of `episode`: h = min(k, length - position)
// steps once the episode ended, k while it is open (the index guarantees k are stored).
struct NStepWindow {
  std::uint32_t steps = 0;  // h >= 1
  bool terminal = false;    // the episode terminated at the window's last step
};
NStepWindow nstep_window(const Episode& episode, std::uint32_t position, std::uint32_t k);

// gamma^h, or 0 when the window reaches a termination (no bootstrap).
double nstep_discount(const NStepWindow& window, double gamma);

// Reads / writes one scalar of a float32 or float64 field.
double read_reward(const std::byte* cell, DType dtype);
void write_reward(std::byte* cell, DType dtype, double value);

}  // namespace replayd
