#include "core/table/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace replayd {
namespace {

std::string number(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string text = std::to_string(value);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

Error invalid(std::string message) {
  return make_error(ErrorCode::invalid_argument, "rate limiter: " + std::move(message));
}

}  // namespace

RateLimiterConfig RateLimiterConfig::min_size(std::int64_t k) {
  return RateLimiterConfig{1.0, k, -kUnbounded, kUnbounded};
}

RateLimiterConfig RateLimiterConfig::sample_to_insert_ratio(double spi, std::int64_t min_size,
                                                            double error_buffer) {
  const double offset = spi * static_cast<double>(min_size);
  return RateLimiterConfig{spi, min_size, offset - error_buffer, offset + error_buffer};
}

RateLimiterConfig RateLimiterConfig::queue(std::int64_t n) {
  return RateLimiterConfig{1.0, 1, 0.0, static_cast<double>(n)};
}

bool RateLimiter::admits_insert(const RateLimiterConfig& config, const RateLimiterCounters& c,
                                std::uint64_t n) {
  const auto size_after = static_cast<double>(c.inserts + n) - static_cast<double>(c.deletes);
  if (size_after <= static_cast<double>(config.min_size_to_sample)) return true;
  const double diff = static_cast<double>(c.inserts + n) * config.samples_per_insert -
                      static_cast<double>(c.samples);
  return diff <= config.max_diff;
}

bool RateLimiter::admits_sample(const RateLimiterConfig& config, const RateLimiterCounters& c,
                                std::uint64_t n) {
  const auto size = static_cast<double>(c.inserts) - static_cast<double>(c.deletes);
  if (size < static_cast<double>(config.min_size_to_sample)) return false;
  const double diff = static_cast<double>(c.inserts) * config.samples_per_insert -
                      static_cast<double>(c.samples + n);
  return diff >= config.min_diff;
}

bool RateLimiter::may_insert(std::uint64_t n) const {
  return admits_insert(config_, counters_, n);
}

bool RateLimiter::may_sample(std::uint64_t n) const {
  return admits_sample(config_, counters_, n);
}

Result<RateLimiter> RateLimiter::create(const RateLimiterConfig& config) {
  const double spi = config.samples_per_insert;
  if (!std::isfinite(spi) || spi <= 0) {
    return invalid("samples_per_insert must be finite and > 0, got " + number(spi));
  }
  if (config.min_size_to_sample < 1) {
    return invalid("min_size_to_sample must be >= 1, got " +
                   std::to_string(config.min_size_to_sample));
  }
  if (std::isnan(config.min_diff) || std::isnan(config.max_diff)) {
    return invalid("min_diff and max_diff must not be NaN");
  }
  if (config.min_diff > config.max_diff) {
    return invalid("min_diff (" + number(config.min_diff) + ") is greater than max_diff (" +
                   number(config.max_diff) + ")");
  }
  const double width = config.max_diff - config.min_diff;
  // Negated so that [inf, inf] and [-inf, -inf] (width NaN) count as empty, not as wide.
  if (!(width >= std::max(1.0, spi))) {
    return invalid("the error buffer [min_diff, max_diff] = [" + number(config.min_diff) + ", " +
                   number(config.max_diff) + "] is narrower than max(1, samples_per_insert) = " +
                   number(std::max(1.0, spi)) + ": inserts and samples could both block forever");
  }
  // Right after min_size inserts with no samples, one of the two sides must be able to move.
  const auto k = static_cast<std::uint64_t>(config.min_size_to_sample);
  const RateLimiterCounters at_min_size{k, 0, 0};
  if (!admits_insert(config, at_min_size, 1) && !admits_sample(config, at_min_size, 1)) {
    return invalid("after min_size_to_sample = " + std::to_string(k) +
                   " inserts neither an insert nor a sample could proceed (diff " +
                   number(spi * static_cast<double>(k)) + " is outside what [" +
                   number(config.min_diff) + ", " + number(config.max_diff) + "] allows)");
  }
  return RateLimiter(config);
}

Status RateLimiter::check_insert_batch(std::uint64_t n) const {
  // Below min size any batch that keeps size <= min_size is free; above it, the diff must
  // fit between the lowest reachable diff and max_diff. The lowest reachable diff is 0
  // before the first sample, and never below min_diff after one.
  if (n <= static_cast<std::uint64_t>(config_.min_size_to_sample)) return Ok{};
  const double needed = static_cast<double>(n) * config_.samples_per_insert;
  const double span = config_.max_diff - std::min(0.0, config_.min_diff);
  if (needed > span) {
    return invalid("an insert of " + std::to_string(n) + " items needs a diff range of " +
                   number(needed) + " but [min(0, min_diff), max_diff] spans " + number(span) +
                   ": it could never proceed");
  }
  return Ok{};
}

Status RateLimiter::check_sample_batch(std::uint64_t n) const {
  // The highest reachable diff is max_diff, or spi * min_size_to_sample right after the free
  // inserts below min size when that is higher.
  const double highest =
      std::max(config_.max_diff,
               config_.samples_per_insert * static_cast<double>(config_.min_size_to_sample));
  const double span = highest - config_.min_diff;
  if (static_cast<double>(n) > span) {
    return invalid("a sample of " + std::to_string(n) + " items needs a diff range of " +
                   std::to_string(n) + " but [min_diff, max(max_diff, spi * min_size)] spans " +
                   number(span) + ": it could never proceed");
  }
  return Ok{};
}

void RateLimiter::reconfigure(const RateLimiterConfig& next) {
  config_ = next;
  const double spi = next.samples_per_insert;
  const double diff =
      static_cast<double>(counters_.inserts) * spi - static_cast<double>(counters_.samples);
  if (diff >= next.min_diff && diff <= next.max_diff) return;
  const bool low = std::isfinite(next.min_diff);
  const bool high = std::isfinite(next.max_diff);
  const double target = low && high ? (next.min_diff + next.max_diff) / 2
                        : high      ? next.max_diff
                                    : next.min_diff;
  const double samples = std::floor(static_cast<double>(counters_.inserts) * spi - target);
  counters_.samples = samples > 0 ? static_cast<std::uint64_t>(samples) : 0;
}

}  // namespace replayd
