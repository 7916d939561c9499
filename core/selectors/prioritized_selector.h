// PrioritizedSelector: P(i) = p_i^alpha / sum_j p_j^alpha (proportional prioritized replay).
// A SumTree holds the masses p^alpha; a MinTree holds the smallest positive mass, which
// gives the largest importance weight in O(1): w_i = (N*P_i)^-beta / max_j (N*P_j)^-beta
// = (m_i / m_min)^-beta, where only items that can be drawn (mass > 0) count.
// When every mass is 0 the selector falls back to uniform (P = 1/N, w = 1).
// Costs: insert/update/remove O(log capacity), sample O(log capacity).
// Bound: one item's mass may not exceed DBL_MAX / (2 * next_pow2(capacity)), so the sum of
// every leaf (and each inner node) stays finite whatever the other priorities are;
// check_priority() rejects a priority beyond it (e.g. 1e160 with alpha 2) before it is stored.
// Rounding: a draw that lands past the last positive leaf is clamped to a positive leaf,
// so a zero-priority item is never returned while any item has positive priority.
#pragma once

#include "core/selectors/min_tree.h"
#include "core/selectors/selector.h"
#include "core/storage/slot_set.h"
#include "core/selectors/sum_tree.h"

namespace replayd {

class PrioritizedSelector final : public Selector {
 public:
  PrioritizedSelector(std::uint32_t capacity, double priority_exponent);

  // Sum tree, min tree and the dense member set.
  static std::uint64_t bytes_for(std::uint32_t capacity) {
    return SumTree::bytes_for(capacity) + MinTree::bytes_for(capacity) +
           SlotSet::bytes_for(capacity);
  }
  std::uint64_t allocated_bytes() const override {
    return masses_.allocated_bytes() + positive_masses_.allocated_bytes() +
           present_.allocated_bytes();
  }

  void insert(std::uint32_t slot, double priority) override;
  void update(std::uint32_t slot, double priority) override;
  void remove(std::uint32_t slot) override;
  void clear() override;
  Pick sample(Rng& rng, double beta) const override;
  SelectorKind kind() const override { return SelectorKind::prioritized; }
  Status check_priority(double priority) const override;
  // The largest mass (priority^alpha) one item may have.
  double max_mass() const { return max_mass_; }
  // The dense order of present_ (used by the all-zero fallback); masses follow priorities.
  void for_each_in_order(const std::function<void(std::uint32_t)>& visit) const override {
    for (std::uint32_t i = 0; i < present_.size(); ++i)
      visit(present_.at(i));
  }
  // {sum of p^alpha, smallest positive p^alpha}; {0, 0} when every priority is 0 (the
  // table then samples uniformly: a client combining shards falls back to their sizes).
  SamplingMass mass(std::uint32_t present) const override;

 private:
  double mass_of(double priority) const;
  void set_mass(std::uint32_t slot, double mass);

  double exponent_;
  double max_mass_;
  SumTree masses_;
  MinTree positive_masses_;  // mass of each slot with mass > 0, else empty
  SlotSet present_;          // for the all-zero uniform fallback and N
};

}  // namespace replayd
