// FifoSelector and LifoSelector: deterministic choice of the oldest (FIFO) or newest (LIFO)
// present slot by insertion order; P = 1 and weight 1. Every call is O(1).
// As removers, FIFO evicts the oldest item and LIFO the newest.
#pragma once

#include "core/selectors/selector.h"
#include "core/storage/slot_order.h"

namespace replayd {

class OrderSelector : public Selector {
 public:
  explicit OrderSelector(std::uint32_t capacity) : order_(capacity) {}

  static std::uint64_t bytes_for(std::uint32_t capacity) { return SlotOrder::bytes_for(capacity); }
  std::uint64_t allocated_bytes() const override { return order_.allocated_bytes(); }

  void insert(std::uint32_t slot, double) override { order_.push_back(slot); }
  void update(std::uint32_t, double) override {}
  void remove(std::uint32_t slot) override { order_.erase(slot); }
  void clear() override { order_.clear(); }
  void for_each_in_order(const std::function<void(std::uint32_t)>& visit) const override {
    for (auto slot = order_.oldest(); slot != SlotOrder::kNone; slot = order_.next(slot)) {
      visit(slot);
    }
  }

 protected:
  SlotOrder order_;
};

class FifoSelector final : public OrderSelector {
 public:
  using OrderSelector::OrderSelector;
  Pick sample(Rng&, double) const override { return Pick{order_.oldest(), 1.0, 1.0}; }
  SelectorKind kind() const override { return SelectorKind::fifo; }
};

class LifoSelector final : public OrderSelector {
 public:
  using OrderSelector::OrderSelector;
  Pick sample(Rng&, double) const override { return Pick{order_.newest(), 1.0, 1.0}; }
  SelectorKind kind() const override { return SelectorKind::lifo; }
};

}  // namespace replayd
