// n-step windows of an episodic table: which steps a draw at position p covers, and the
// reward arithmetic (returns accumulate in double, then are stored in the reward field's
// dtype). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/episodes/episode_index.h"

namespace replayd {

// The window of an n-step draw at position p of an episode: h = min(k, length - p) steps
// once the episode ended, k while it is open (the window index guarantees k are stored).
struct NStepWindow {
  std::uint32_t steps = 0;  // h >= 1
  bool terminal = false;    // the episode terminated at the window's last step
};

// Walks the n-step window that starts at the stored `start`: calls visit(slot) for each of
// its h steps in order (following EpisodeIndex::following) and returns h and whether the
// episode terminated at the last one. Precondition: the window is stored (the window index
// admitted `start`). O(h), about one cache miss for the links.
template <typename Visit>
NStepWindow walk_nstep(const EpisodeIndex& index, std::uint32_t start, std::uint32_t k,
                       Visit&& visit) {
  NStepWindow window;
  std::uint32_t slot = start;
  while (true) {
    visit(slot);
    ++window.steps;
    const std::uint32_t next = index.following(slot);
    if (window.steps == k || next >= EpisodeIndex::kNextGone) {
      window.terminal = next == EpisodeIndex::kTerminatesHere;
      return window;
    }
    slot = next;
  }
}

// gamma^h, or 0 when the window reaches a termination (no bootstrap).
double nstep_discount(const NStepWindow& window, double gamma);

// Reads / writes one scalar of a float32 or float64 field.
inline double read_reward(const std::byte* cell, DType dtype) {
  if (dtype == DType::float64) {
    double value;
    std::memcpy(&value, cell, sizeof value);
    return value;
  }
  float value;
  std::memcpy(&value, cell, sizeof value);
  return value;
}
void write_reward(std::byte* cell, DType dtype, double value);

}  // namespace replayd
