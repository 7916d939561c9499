// Selector: the policy that chooses which stored item a sample (or an eviction) takes.
// A table owns one selector for sampling and a second one, the "remover", for eviction.
// Selectors see only slot numbers and priorities; the table owns the data.
// Not thread-safe; every method runs on the table's owner thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "core/result.h"
#include "core/rng.h"

namespace replayd {

enum class SelectorKind { uniform, prioritized, fifo, lifo, max_heap, min_heap };

struct SelectorConfig {
  SelectorKind kind = SelectorKind::uniform;
  double priority_exponent = 0.6;  // prioritized only: sampling mass is priority^alpha, >= 0
};

std::string_view selector_kind_name(SelectorKind kind);
Result<SelectorKind> parse_selector_kind(std::string_view name);

// One choice: the slot, the probability it had of being chosen on this draw, and its
// importance weight for the beta passed to sample(): (N*P)^-beta / max over items of
// (N*P)^-beta. Selectors whose choice is deterministic or uniform report weight 1.
struct Pick {
  std::uint32_t slot;
  double probability;
  double weight;
};

// The sampling mass of the present items: an item of mass m is drawn with probability
// m / total, and `min_positive` is the smallest mass that can be drawn. Lets a client
// combine several tables (shards) into one distribution with correct importance weights.
// Selectors without priorities give every item mass 1. A total of 0 with items present
// means every priority is 0 and draws are uniform.
struct SamplingMass {
  double total = 0;
  double min_positive = 1;
};

class Selector {
 public:
  virtual ~Selector() = default;

  // Adds an occupied slot with its priority (finite, >= 0). Precondition: slot absent.
  virtual void insert(std::uint32_t slot, double priority) = 0;
  // Changes a present slot's priority. Precondition: slot present.
  virtual void update(std::uint32_t slot, double priority) = 0;
  // Removes a present slot. Precondition: slot present.
  virtual void remove(std::uint32_t slot) = 0;
  // Removes every slot.
  virtual void clear() = 0;
  // Chooses one present slot. Precondition: at least one slot present. O(1) or O(log n).
  virtual Pick sample(Rng& rng, double beta) const = 0;
  virtual SelectorKind kind() const = 0;
  // Snapshot support: calls visit(slot) for every present slot, in the order that decides
  // future choices (insertion order for fifo/lifo, the dense member order for uniform and
  // prioritized). insert()ing the slots in this order, with their priorities, into an empty
  // selector of the same configuration rebuilds an identical selector. O(size).
  virtual void for_each_in_order(const std::function<void(std::uint32_t)>& visit) const = 0;
  // Ok when `priority` (finite, >= 0, already checked by the caller) may be given to a slot:
  // the sampling mass it yields, and any sum of `capacity` such masses, are finite. Else
  // invalid_argument naming the priority and the bound. Selectors without priorities accept
  // every finite priority. O(1).
  virtual Status check_priority(double priority) const {
    (void)priority;
    return Ok{};
  }
  // Bytes this selector's structures hold (what selector_bytes() promised for its kind). O(1).
  virtual std::uint64_t allocated_bytes() const = 0;
  // The mass of the `present` items (their count, given by the caller). O(1).
  virtual SamplingMass mass(std::uint32_t present) const {
    return SamplingMass{static_cast<double>(present), 1.0};
  }
};

// Bytes a selector of `kind` over slots [0, capacity) allocates, all at construction. O(1).
std::uint64_t selector_bytes(SelectorKind kind, std::uint32_t capacity);

// Validates the configuration (names the bad parameter) and builds a selector for slots
// [0, capacity).
Result<std::unique_ptr<Selector>> make_selector(const SelectorConfig& config,
                                                std::uint32_t capacity);

}  // namespace replayd
