#include "core/selectors/selector.h"

#include <cmath>

#include "core/selectors/heap_selector.h"
#include "core/selectors/order_selectors.h"
#include "core/selectors/prioritized_selector.h"
#include "core/selectors/uniform_selector.h"

namespace replayd {

std::string_view selector_kind_name(SelectorKind kind) {
  switch (kind) {
    case SelectorKind::uniform:
      return "uniform";
    case SelectorKind::prioritized:
      return "prioritized";
    case SelectorKind::fifo:
      return "fifo";
    case SelectorKind::lifo:
      return "lifo";
    case SelectorKind::max_heap:
      return "max_heap";
    case SelectorKind::min_heap:
      return "min_heap";
  }
  return "unknown";
}

Result<SelectorKind> parse_selector_kind(std::string_view name) {
  for (auto kind : {SelectorKind::uniform, SelectorKind::prioritized, SelectorKind::fifo,
                    SelectorKind::lifo, SelectorKind::max_heap, SelectorKind::min_heap}) {
    if (selector_kind_name(kind) == name) return kind;
  }
  return make_error(ErrorCode::invalid_argument,
                    "unknown selector '" + std::string(name) +
                        "': expected uniform, prioritized, fifo, lifo, max_heap or min_heap");
}

std::uint64_t selector_bytes(SelectorKind kind, std::uint32_t capacity) {
  switch (kind) {
    case SelectorKind::uniform:
      return UniformSelector::bytes_for(capacity);
    case SelectorKind::fifo:
    case SelectorKind::lifo:
      return OrderSelector::bytes_for(capacity);
    case SelectorKind::prioritized:
      return PrioritizedSelector::bytes_for(capacity);
    case SelectorKind::max_heap:
    case SelectorKind::min_heap:
      return HeapSelector::bytes_for(capacity);
  }
  return 0;
}

Result<std::unique_ptr<Selector>> make_selector(const SelectorConfig& config,
                                                std::uint32_t capacity) {
  switch (config.kind) {
    case SelectorKind::uniform:
      return std::unique_ptr<Selector>(new UniformSelector(capacity));
    case SelectorKind::fifo:
      return std::unique_ptr<Selector>(new FifoSelector(capacity));
    case SelectorKind::lifo:
      return std::unique_ptr<Selector>(new LifoSelector(capacity));
    case SelectorKind::max_heap:
      return std::unique_ptr<Selector>(new HeapSelector(capacity, /*largest_first=*/true));
    case SelectorKind::min_heap:
      return std::unique_ptr<Selector>(new HeapSelector(capacity, /*largest_first=*/false));
    case SelectorKind::prioritized:
      if (!std::isfinite(config.priority_exponent) || config.priority_exponent < 0) {
        return make_error(ErrorCode::invalid_argument,
                          "priority_exponent must be finite and >= 0, got " +
                              std::to_string(config.priority_exponent));
      }
      return std::unique_ptr<Selector>(new PrioritizedSelector(capacity, config.priority_exponent));
  }
  return make_error(ErrorCode::invalid_argument, "unknown selector kind");
}

}  // namespace replayd
