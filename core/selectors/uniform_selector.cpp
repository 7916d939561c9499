#include "core/selectors/uniform_selector.h"

namespace replayd {

Pick UniformSelector::sample(Rng& rng, double) const {
  const std::uint32_t n = slots_.size();
  return Pick{slots_.at(static_cast<std::uint32_t>(rng.uniform_below(n))), 1.0 / n, 1.0};
}

}  // namespace replayd
