// Tests for core/selector.* and core/selectors/*: each selector's empirical distribution
// matches its exact probabilities (chi-square over >= 100k draws, fixed seeds), importance
// weights match the formula computed here from the priorities, FIFO/LIFO order, heap order
// against a sorted model on random streams.
#include "core/selectors/selector.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "tests/core/chi_square.h"

namespace replayd {
namespace {

using Catch::Matchers::Contains;

using testing::chi_square_critical;
using testing::normal_upper_quantile;

constexpr double kSignificance = 0.001;

struct ChiSquare {
  double statistic = 0;
  std::size_t df = 0;
  double critical = 0;
  bool passes() const { return statistic < critical; }
};

// Pearson's test of observed counts against expected probabilities. Categories with
// probability 0 are left out (the caller checks they were never drawn).
ChiSquare chi_square(const std::vector<std::uint64_t>& observed,
                     const std::vector<double>& probabilities) {
  std::uint64_t draws = 0;
  for (auto count : observed)
    draws += count;
  ChiSquare result;
  std::size_t categories = 0;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    if (probabilities[i] <= 0) continue;
    const double expected = probabilities[i] * static_cast<double>(draws);
    REQUIRE(expected >= 5);  // the test is only valid with enough expected draws per category
    const double diff = static_cast<double>(observed[i]) - expected;
    result.statistic += diff * diff / expected;
    ++categories;
  }
  result.df = categories - 1;
  result.critical = chi_square_critical(result.df, kSignificance);
  return result;
}

std::unique_ptr<Selector> make(SelectorKind kind, std::uint32_t capacity, double alpha = 0.6) {
  auto selector = make_selector(SelectorConfig{kind, alpha}, capacity);
  REQUIRE(selector.ok());
  return std::move(selector).value();
}

TEST_CASE("the chi-square critical value matches tabulated values") {
  // Tabulated chi-square quantiles at p = 0.001: df 10 -> 29.588, df 30 -> 59.703.
  // Wilson-Hilferty is accurate to well under 1% there.
  CHECK(chi_square_critical(10, 0.001) == Approx(29.588).epsilon(0.01));
  CHECK(chi_square_critical(30, 0.001) == Approx(59.703).epsilon(0.005));
  CHECK(normal_upper_quantile(0.001) == Approx(3.0902).epsilon(1e-4));
}

TEST_CASE("uniform selector draws every present slot equally often and no removed slot") {
  const std::uint32_t capacity = 32;
  auto selector = make(SelectorKind::uniform, capacity);
  for (std::uint32_t slot = 0; slot < capacity; ++slot)
    selector->insert(slot, 1.0 + slot);
  // Removals from the front, middle and end of the dense set, and one re-insert.
  for (std::uint32_t slot : {0u, 17u, 31u, 3u, 20u})
    selector->remove(slot);
  selector->insert(20, 5.0);
  std::vector<double> expected(capacity, 1.0 / 28);
  for (std::uint32_t slot : {0u, 17u, 31u, 3u})
    expected[slot] = 0.0;

  Rng rng(2024);
  std::vector<std::uint64_t> counts(capacity, 0);
  for (int draw = 0; draw < 140000; ++draw) {
    const Pick pick = selector->sample(rng, 0.4);
    REQUIRE(pick.slot < capacity);
    REQUIRE(expected[pick.slot] > 0);
    REQUIRE(pick.probability == Approx(1.0 / 28));
    REQUIRE(pick.weight == 1.0);
    ++counts[pick.slot];
  }
  const ChiSquare test = chi_square(counts, expected);
  INFO("chi2 = " << test.statistic << ", df = " << test.df << ", critical = " << test.critical);
  CHECK(test.df == 27);
  CHECK(test.passes());
}

// Exact P(i) = p_i^alpha / sum_j p_j^alpha, with 0 for p_i = 0 whatever alpha is.
std::vector<double> prioritized_probabilities(const std::vector<double>& priorities, double alpha) {
  std::vector<double> masses(priorities.size(), 0.0);
  double total = 0;
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    if (priorities[i] > 0) masses[i] = std::pow(priorities[i], alpha);
    total += masses[i];
  }
  for (auto& mass : masses)
    mass /= total;
  return masses;
}

// w_i = (N * P_i)^-beta / max_j (N * P_j)^-beta, the max over items that can be drawn.
std::vector<double> importance_weights(const std::vector<double>& probabilities, double beta) {
  const double n = static_cast<double>(probabilities.size());
  double max_weight = 0;
  for (double p : probabilities) {
    if (p > 0) max_weight = std::max(max_weight, std::pow(n * p, -beta));
  }
  std::vector<double> weights(probabilities.size(), 0.0);
  for (std::size_t i = 0; i < probabilities.size(); ++i) {
    if (probabilities[i] > 0) weights[i] = std::pow(n * probabilities[i], -beta) / max_weight;
  }
  return weights;
}

// Draws `draws` picks, checks each pick's probability and weight against the exact values,
// and returns the chi-square test of the counts.
ChiSquare check_prioritized_draws(const Selector& selector, const std::vector<double>& priorities,
                                  double alpha, double beta, std::uint64_t seed, int draws) {
  const auto probabilities = prioritized_probabilities(priorities, alpha);
  const auto weights = importance_weights(probabilities, beta);
  Rng rng(seed);
  std::vector<std::uint64_t> counts(priorities.size(), 0);
  for (int draw = 0; draw < draws; ++draw) {
    const Pick pick = selector.sample(rng, beta);
    REQUIRE(pick.slot < priorities.size());
    INFO("slot " << pick.slot << " priority " << priorities[pick.slot]);
    REQUIRE(priorities[pick.slot] > 0);  // a zero priority is never drawn
    REQUIRE(pick.probability == Approx(probabilities[pick.slot]).epsilon(1e-12));
    REQUIRE(pick.weight == Approx(weights[pick.slot]).epsilon(1e-12));
    ++counts[pick.slot];
  }
  return chi_square(counts, probabilities);
}

TEST_CASE("prioritized selector draws in proportion to priority^alpha, never a zero priority") {
  const std::vector<double> priorities{0, 0.5, 1, 2, 0, 4, 8, 0.25, 3, 0, 1.5, 6};
  for (double alpha : {0.0, 0.6, 1.0, 1.7}) {
    INFO("alpha " << alpha);
    auto selector = make(SelectorKind::prioritized, 12, alpha);
    for (std::uint32_t slot = 0; slot < 12; ++slot)
      selector->insert(slot, priorities[slot]);
    const ChiSquare test = check_prioritized_draws(*selector, priorities, alpha, 0.4, 11, 150000);
    INFO("chi2 = " << test.statistic << ", df = " << test.df << ", critical = " << test.critical);
    CHECK(test.df == 8);
    CHECK(test.passes());
  }
}

TEST_CASE("the chi-square check is sensitive enough to tell alpha 0.6 from alpha 0.5") {
  // Guards the test above against being toothless: the same draws fail against the
  // probabilities of a slightly different exponent.
  const std::vector<double> priorities{0, 0.5, 1, 2, 0, 4, 8, 0.25, 3, 0, 1.5, 6};
  auto selector = make(SelectorKind::prioritized, 12, 0.6);
  for (std::uint32_t slot = 0; slot < 12; ++slot)
    selector->insert(slot, priorities[slot]);
  Rng rng(11);
  std::vector<std::uint64_t> counts(12, 0);
  for (int draw = 0; draw < 150000; ++draw)
    ++counts[selector->sample(rng, 0.0).slot];
  CHECK(chi_square(counts, prioritized_probabilities(priorities, 0.6)).passes());
  CHECK_FALSE(chi_square(counts, prioritized_probabilities(priorities, 0.5)).passes());
}

TEST_CASE("prioritized selector follows priority updates, removals and re-inserts") {
  const double alpha = 0.6;
  std::vector<double> priorities{0, 0.5, 1, 2, 0, 4, 8, 0.25, 3, 0, 1.5, 6};
  auto selector = make(SelectorKind::prioritized, 16, alpha);
  for (std::uint32_t slot = 0; slot < 12; ++slot)
    selector->insert(slot, priorities[slot]);

  selector->update(0, 2.5);  // zero -> positive
  selector->update(6, 0.0);  // the largest -> zero
  selector->update(7, 9.0);  // the smallest -> the largest
  selector->remove(3);
  selector->remove(11);
  selector->insert(14, 0.75);  // a slot never used before
  priorities[0] = 2.5;
  priorities[6] = 0.0;
  priorities[7] = 9.0;
  priorities[3] = 0.0;  // removed: probability 0
  priorities[11] = 0.0;
  priorities.resize(16, 0.0);
  priorities[14] = 0.75;

  const ChiSquare test = check_prioritized_draws(*selector, priorities, alpha, 1.0, 12, 150000);
  INFO("chi2 = " << test.statistic << ", df = " << test.df << ", critical = " << test.critical);
  CHECK(test.df == 7);  // 8 drawable items: slots 0, 1, 2, 5, 7, 8, 10, 14
  CHECK(test.passes());
}

TEST_CASE("importance weights are 1 when beta is 0 and largest for the rarest item") {
  auto selector = make(SelectorKind::prioritized, 4, 1.0);
  selector->insert(0, 1.0);
  selector->insert(1, 3.0);
  selector->insert(2, 0.0);
  Rng rng(3);
  bool saw_rare = false;
  for (int draw = 0; draw < 1000; ++draw) {
    const Pick unweighted = selector->sample(rng, 0.0);
    REQUIRE(unweighted.weight == 1.0);
    const Pick weighted = selector->sample(rng, 0.5);
    if (weighted.slot == 0) {
      saw_rare = true;
      REQUIRE(weighted.weight == 1.0);  // the rarest drawable item has the largest weight
    } else {
      REQUIRE(weighted.slot == 1);
      REQUIRE(weighted.weight == Approx(std::pow(3.0, -0.5)));
    }
  }
  CHECK(saw_rare);
}

TEST_CASE("prioritized selector with every priority 0 falls back to uniform with weight 1") {
  const std::uint32_t n = 20;
  auto selector = make(SelectorKind::prioritized, n, 0.6);
  for (std::uint32_t slot = 0; slot < n; ++slot)
    selector->insert(slot, 1.0);
  for (std::uint32_t slot = 0; slot < n; ++slot)
    selector->update(slot, 0.0);
  selector->remove(3);  // reshuffles the dense set used by the fallback
  selector->insert(3, 0.0);

  Rng rng(8);
  std::vector<std::uint64_t> counts(n, 0);
  for (int draw = 0; draw < 100000; ++draw) {
    const Pick pick = selector->sample(rng, 0.7);
    REQUIRE(pick.slot < n);
    REQUIRE(pick.probability == Approx(1.0 / n));
    REQUIRE(pick.weight == 1.0);
    ++counts[pick.slot];
  }
  const ChiSquare test = chi_square(counts, std::vector<double>(n, 1.0 / n));
  INFO("chi2 = " << test.statistic << ", df = " << test.df << ", critical = " << test.critical);
  CHECK(test.passes());

  // One positive priority ends the fallback: only that item is drawn, with P = 1.
  selector->update(7, 0.01);
  for (int draw = 0; draw < 1000; ++draw) {
    const Pick pick = selector->sample(rng, 0.7);
    REQUIRE(pick.slot == 7);
    REQUIRE(pick.probability == 1.0);
    REQUIRE(pick.weight == 1.0);
  }
}

TEST_CASE("FIFO returns the oldest present slot and LIFO the newest, by insertion order") {
  auto fifo = make(SelectorKind::fifo, 10);
  auto lifo = make(SelectorKind::lifo, 10);
  Rng rng(1);
  for (std::uint32_t slot : {5u, 2u, 9u, 0u}) {  // insertion order differs from slot order
    fifo->insert(slot, 1.0);
    lifo->insert(slot, 1.0);
  }
  fifo->update(9, 100.0);  // priorities do not matter to either
  lifo->update(2, 100.0);
  for (int i = 0; i < 3; ++i) {  // sampling does not consume
    const Pick oldest = fifo->sample(rng, 0.5);
    CHECK(oldest.slot == 5);
    CHECK(oldest.probability == 1.0);
    CHECK(oldest.weight == 1.0);
    const Pick newest = lifo->sample(rng, 0.5);
    CHECK(newest.slot == 0);
    CHECK(newest.probability == 1.0);
    CHECK(newest.weight == 1.0);
  }
  fifo->remove(5);
  lifo->remove(0);
  CHECK(fifo->sample(rng, 0).slot == 2);
  CHECK(lifo->sample(rng, 0).slot == 9);
  fifo->remove(9);  // from the middle
  lifo->remove(2);
  CHECK(fifo->sample(rng, 0).slot == 2);
  CHECK(lifo->sample(rng, 0).slot == 9);
  fifo->insert(5, 1.0);  // re-inserted: now the newest
  lifo->insert(5, 1.0);
  CHECK(fifo->sample(rng, 0).slot == 2);
  CHECK(lifo->sample(rng, 0).slot == 5);
  fifo->remove(2);
  CHECK(fifo->sample(rng, 0).slot == 0);
}

TEST_CASE("max_heap chooses the largest priority and min_heap the smallest, P = 1, weight 1") {
  auto max_heap = make(SelectorKind::max_heap, 10);
  auto min_heap = make(SelectorKind::min_heap, 10);
  Rng rng(3);
  const std::vector<std::pair<std::uint32_t, double>> items = {
      {4, 2.5}, {7, 0.0}, {1, 9.0}, {8, 3.0}, {0, 0.5}};
  for (const auto& [slot, priority] : items) {
    max_heap->insert(slot, priority);
    min_heap->insert(slot, priority);
  }
  for (int i = 0; i < 3; ++i) {  // sampling does not consume
    const Pick largest = max_heap->sample(rng, 0.5);
    CHECK(largest.slot == 1);
    CHECK(largest.probability == 1.0);
    CHECK(largest.weight == 1.0);
    const Pick smallest = min_heap->sample(rng, 0.5);
    CHECK(smallest.slot == 7);
    CHECK(smallest.probability == 1.0);
    CHECK(smallest.weight == 1.0);
  }
  max_heap->update(1, 0.1);  // the top moves down: 8 (3.0) is now the largest
  min_heap->update(4, 0.0);  // a slot moves up to tie the smallest; 7 was there first
  CHECK(max_heap->sample(rng, 0).slot == 8);
  CHECK(min_heap->sample(rng, 0).slot == 7);
  max_heap->remove(8);
  min_heap->remove(7);
  CHECK(max_heap->sample(rng, 0).slot == 4);
  CHECK(min_heap->sample(rng, 0).slot == 4);
}

TEST_CASE("among equal priorities a heap chooses the least recently inserted or updated") {
  for (auto kind : {SelectorKind::max_heap, SelectorKind::min_heap}) {
    INFO("selector " << selector_kind_name(kind));
    auto heap = make(kind, 8);
    Rng rng(5);
    for (std::uint32_t slot : {6u, 2u, 5u, 0u})
      heap->insert(slot, 1.0);
    CHECK(heap->sample(rng, 0).slot == 6);
    heap->update(6, 1.0);  // same priority, but now the most recently touched
    CHECK(heap->sample(rng, 0).slot == 2);
    heap->remove(2);
    CHECK(heap->sample(rng, 0).slot == 5);
    heap->insert(2, 1.0);
    // Draining by repeated remove of the chosen slot gives the touch order.
    std::vector<std::uint32_t> order;
    while (order.size() < 4) {
      order.push_back(heap->sample(rng, 0).slot);
      heap->remove(order.back());
    }
    CHECK(order == std::vector<std::uint32_t>{5, 0, 6, 2});
  }
}

TEST_CASE("a heap drains in priority order on random streams, matching a sorted model") {
  for (auto kind : {SelectorKind::max_heap, SelectorKind::min_heap}) {
    INFO("selector " << selector_kind_name(kind));
    const std::uint32_t capacity = 64;
    auto heap = make(kind, capacity);
    Rng rng(77);
    // Model: slot -> (priority, stamp); the choice is the best by (priority, then stamp).
    std::map<std::uint32_t, std::pair<double, std::uint64_t>> model;
    std::uint64_t stamp = 0;
    auto expected = [&] {
      auto best = model.begin();
      for (auto it = model.begin(); it != model.end(); ++it) {
        const auto [p, t] = it->second;
        const auto [bp, bt] = best->second;
        const bool better = kind == SelectorKind::max_heap ? p > bp : p < bp;
        if (better || (p == bp && t < bt)) best = it;
      }
      return best->first;
    };
    for (int step = 0; step < 20000; ++step) {
      const auto slot = static_cast<std::uint32_t>(rng.next() % capacity);
      const double priority = static_cast<double>(rng.next() % 6);  // many ties
      const auto op = rng.next() % 3;
      if (!model.contains(slot)) {
        heap->insert(slot, priority);
        model[slot] = {priority, stamp++};
      } else if (op == 0) {
        heap->update(slot, priority);
        model[slot] = {priority, stamp++};
      } else {
        heap->remove(slot);
        model.erase(slot);
      }
      if (!model.empty()) REQUIRE(heap->sample(rng, 0).slot == expected());
    }
    // Re-inserting in for_each_in_order order rebuilds the same choices, ties included.
    auto rebuilt = make(kind, capacity);
    heap->for_each_in_order([&](std::uint32_t slot) { rebuilt->insert(slot, model[slot].first); });
    while (!model.empty()) {
      const std::uint32_t slot = expected();
      REQUIRE(rebuilt->sample(rng, 0).slot == slot);
      rebuilt->remove(slot);
      model.erase(slot);
    }
  }
}

TEST_CASE("a cleared selector holds nothing of what it held before") {
  for (auto kind : {SelectorKind::uniform, SelectorKind::prioritized, SelectorKind::fifo,
                    SelectorKind::lifo, SelectorKind::max_heap, SelectorKind::min_heap}) {
    INFO("selector " << selector_kind_name(kind));
    auto selector = make(kind, 8);
    CHECK(selector->kind() == kind);
    for (std::uint32_t slot = 0; slot < 8; ++slot)
      selector->insert(slot, 2.0);
    selector->clear();
    selector->insert(6, 0.5);
    Rng rng(4);
    for (int draw = 0; draw < 200; ++draw) {
      const Pick pick = selector->sample(rng, 0.5);
      REQUIRE(pick.slot == 6);
      REQUIRE(pick.probability == 1.0);
      REQUIRE(pick.weight == 1.0);
    }
  }
}

TEST_CASE("a prioritized selector with a negative or non-finite exponent is refused") {
  for (double alpha : {-0.1, std::nan(""), HUGE_VAL}) {
    auto selector = make_selector(SelectorConfig{SelectorKind::prioritized, alpha}, 4);
    REQUIRE_FALSE(selector.ok());
    CHECK(selector.error().code == ErrorCode::invalid_argument);
    CHECK_THAT(selector.error().message, Contains("priority_exponent"));
  }
  // The exponent only matters to the prioritized selector.
  CHECK(make_selector(SelectorConfig{SelectorKind::uniform, -1.0}, 4).ok());
}

TEST_CASE("selector kind names round-trip and unknown names are refused by name") {
  for (auto kind : {SelectorKind::uniform, SelectorKind::prioritized, SelectorKind::fifo,
                    SelectorKind::lifo, SelectorKind::max_heap, SelectorKind::min_heap}) {
    auto parsed = parse_selector_kind(selector_kind_name(kind));
    REQUIRE(parsed.ok());
    CHECK(*parsed == kind);
  }
  auto bad = parse_selector_kind("random");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(bad.error().message, Contains("'random'"));
}

}  // namespace
}  // namespace replayd
