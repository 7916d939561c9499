// UniformSelector: every present slot equally likely, P = 1/N, weight 1. O(1) per call.
#pragma once

#include "core/selectors/selector.h"
#include "core/storage/slot_set.h"

namespace replayd {

class UniformSelector final : public Selector {
 public:
  explicit UniformSelector(std::uint32_t capacity) : slots_(capacity) {}

  static std::uint64_t bytes_for(std::uint32_t capacity) { return SlotSet::bytes_for(capacity); }
  std::uint64_t allocated_bytes() const override { return slots_.allocated_bytes(); }

  void insert(std::uint32_t slot, double) override { slots_.insert(slot); }
  void update(std::uint32_t, double) override {}
  void remove(std::uint32_t slot) override { slots_.erase(slot); }
  void clear() override { slots_.clear(); }
  void for_each_in_order(const std::function<void(std::uint32_t)>& visit) const override {
    for (std::uint32_t i = 0; i < slots_.size(); ++i)
      visit(slots_.at(i));
  }
  Pick sample(Rng& rng, double beta) const override;
  SelectorKind kind() const override { return SelectorKind::uniform; }

 private:
  SlotSet slots_;
};

}  // namespace replayd
