// Pearson's chi-square test for the core tests' distribution checks (fixed seeds, upper
// tail 0.001, Wilson-Hilferty critical values).
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

namespace replayd::testing {

inline double normal_upper_quantile(double p) {
  double low = 0.0;
  double high = 40.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = (low + high) / 2;
    if (0.5 * std::erfc(mid / std::sqrt(2.0)) > p) {
      low = mid;
    } else {
      high = mid;
    }
  }
  return low;
}

inline double chi_square_critical(std::size_t df, double p) {
  const double k = static_cast<double>(df);
  const double z = normal_upper_quantile(p);
  const double term = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * term * term * term;
}

struct ChiSquare {
  double statistic = 0;
  std::size_t df = 0;
  double critical = 0;
  bool passes() const { return statistic < critical; }
};

// Observed counts against expected probabilities (categories of probability 0 left out;
// the caller checks they were never drawn).
inline ChiSquare chi_square(const std::vector<std::uint64_t>& observed,
                            const std::vector<double>& probabilities) {
  std::uint64_t draws = 0;
  for (auto count : observed)
    draws += count;
  ChiSquare result;
  std::size_t categories = 0;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    if (probabilities[i] <= 0) continue;
    const double expected = probabilities[i] * static_cast<double>(draws);
    REQUIRE(expected >= 5);
    const double diff = static_cast<double>(observed[i]) - expected;
    result.statistic += diff * diff / expected;
    ++categories;
  }
  result.df = categories - 1;
  result.critical = chi_square_critical(result.df, 0.001);
  return result;
}

}  // namespace replayd::testing
