#include "core/selectors/prioritized_selector.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace replayd {

PrioritizedSelector::PrioritizedSelector(std::uint32_t capacity, double priority_exponent)
    : exponent_(priority_exponent),
      max_mass_(std::numeric_limits<double>::max() /
                (2.0 * std::bit_ceil(std::max<std::uint32_t>(capacity, 1)))),
      masses_(capacity),
      positive_masses_(capacity),
      present_(capacity) {}

double PrioritizedSelector::mass_of(double priority) const {
  // 0^0 is 1 in std::pow; an item with priority 0 must stay undrawable even when alpha = 0.
  if (priority <= 0) return 0.0;
  return exponent_ == 1.0 ? priority : std::pow(priority, exponent_);
}

Status PrioritizedSelector::check_priority(double priority) const {
  const double mass = mass_of(priority);
  if (std::isfinite(mass) && mass <= max_mass_) return Ok{};
  char text[256];
  std::snprintf(text, sizeof text,
                "priority %g gives a sampling mass (priority^%g) of %g; one item's mass must not "
                "exceed %g, so that the table's total mass stays finite",
                priority, exponent_, mass, max_mass_);
  return make_error(ErrorCode::invalid_argument, text);
}

void PrioritizedSelector::set_mass(std::uint32_t slot, double mass) {
  masses_.set(slot, mass);
  positive_masses_.set(slot, mass > 0 ? mass : MinTree::kEmpty);
}

void PrioritizedSelector::insert(std::uint32_t slot, double priority) {
  present_.insert(slot);
  set_mass(slot, mass_of(priority));
}

void PrioritizedSelector::update(std::uint32_t slot, double priority) {
  set_mass(slot, mass_of(priority));
}

void PrioritizedSelector::remove(std::uint32_t slot) {
  present_.erase(slot);
  masses_.set(slot, 0.0);
  positive_masses_.set(slot, MinTree::kEmpty);
}

void PrioritizedSelector::clear() {
  present_.clear();
  masses_.clear();
  positive_masses_.clear();
}

SamplingMass PrioritizedSelector::mass(std::uint32_t present) const {
  (void)present;
  const double total = masses_.total();
  return total > 0 ? SamplingMass{total, positive_masses_.min()} : SamplingMass{0.0, 0.0};
}

Pick PrioritizedSelector::sample(Rng& rng, double beta) const {
  const double total = masses_.total();
  const std::uint32_t n = present_.size();
  if (!(total > 0)) {
    return Pick{present_.at(static_cast<std::uint32_t>(rng.uniform_below(n))), 1.0 / n, 1.0};
  }
  const std::uint32_t slot = masses_.find(rng.uniform_double() * total);
  const double mass = masses_.get(slot);
  const double weight = beta == 0 ? 1.0 : std::pow(mass / positive_masses_.min(), -beta);
  return Pick{slot, mass / total, weight};
}

}  // namespace replayd
