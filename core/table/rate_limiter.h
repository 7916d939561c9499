// RateLimiter: decides whether an insert or a sample of n items may proceed now, with
// Reverb's semantics. It only decides and counts; waiting is the caller's business.
// Not thread-safe; runs on the table's owner thread.
//
// State: inserts I, samples S, deletes D (every removal: eviction, delete, max_times_sampled).
// Size = I - D. With spi = samples_per_insert, the "diff" is I*spi - S.
//   may sample n  <=>  size >= min_size_to_sample  and  I*spi - (S + n) >= min_diff
//   may insert n  <=>  size + n <= min_size_to_sample  or  (I + n)*spi - S <= max_diff
// Inserts are always free until min_size_to_sample items exist.
#pragma once

#include <cstdint>
#include <limits>

#include "core/result.h"

namespace replayd {

struct RateLimiterConfig {
  static constexpr double kUnbounded = std::numeric_limits<double>::infinity();

  double samples_per_insert = 1.0;      // spi, > 0
  std::int64_t min_size_to_sample = 1;  // items, >= 1
  double min_diff = -kUnbounded;        // lower bound on I*spi - S
  double max_diff = kUnbounded;         // upper bound on I*spi - S

  // Sampling allowed once k items exist; inserts never held back.
  static RateLimiterConfig min_size(std::int64_t k);
  // Keeps I*spi - S within spi*min_size +/- error_buffer once min_size items exist.
  static RateLimiterConfig sample_to_insert_ratio(double spi, std::int64_t min_size,
                                                  double error_buffer);
  // A queue of at most n items between inserts and samples (use with FIFO selector and
  // max_times_sampled = 1): spi 1, min_size 1, diff in [0, n].
  static RateLimiterConfig queue(std::int64_t n);

  bool operator==(const RateLimiterConfig&) const = default;
};

struct RateLimiterCounters {
  std::uint64_t inserts = 0;
  std::uint64_t samples = 0;
  std::uint64_t deletes = 0;
  bool operator==(const RateLimiterCounters&) const = default;
};

class RateLimiter {
 public:
  // Rejects configurations that are invalid or can never make progress, naming the reason:
  // spi <= 0 or not finite, min_size < 1, min_diff > max_diff, an error buffer too narrow
  // to fit one insert or one sample, or a state reached right after min_size inserts from
  // which neither an insert nor a sample may proceed.
  static Result<RateLimiter> create(const RateLimiterConfig& config);

  bool may_insert(std::uint64_t n) const;
  bool may_sample(std::uint64_t n) const;

  // A batch of n that no reachable state would ever admit (n too large for the error
  // buffer) is an invalid_argument error naming the limit; otherwise Ok. Reachable means
  // without deletes (deletes let inserts below min size raise the diff without bound). A
  // batch that may_insert / may_sample admits now always passes, so one admissible only in
  // an early state (empty, or right after the free inserts) passes and may wait forever later.
  Status check_insert_batch(std::uint64_t n) const;
  Status check_sample_batch(std::uint64_t n) const;

  void record_inserts(std::uint64_t n) { counters_.inserts += n; }
  void record_samples(std::uint64_t n) { counters_.samples += n; }
  void record_deletes(std::uint64_t n) { counters_.deletes += n; }
  void reset() { counters_ = {}; }

  const RateLimiterConfig& config() const { return config_; }
  const RateLimiterCounters& counters() const { return counters_; }
  // Restores counters from a snapshot.
  void set_counters(const RateLimiterCounters& counters) { counters_ = counters; }

  // Replaces the configuration at run time (`next` as create() validated it). The new
  // limiter governs from now on: when the present diff I*spi - S (at the new spi) lies
  // within [min_diff, max_diff] the counters carry on; otherwise they are rebased so that
  // the diff starts at the middle of that band (at its one finite bound when the other is
  // unbounded), as if the table had just reached min_size under the new limiter: items
  // stored before the change are not charged to later inserts or samples. Only the
  // samples counter moves (never below 0); inserts and deletes keep counting. O(1).
  void reconfigure(const RateLimiterConfig& next);

 private:
  explicit RateLimiter(const RateLimiterConfig& config) : config_(config) {}
  static bool admits_insert(const RateLimiterConfig& config, const RateLimiterCounters& c,
                            std::uint64_t n);
  static bool admits_sample(const RateLimiterConfig& config, const RateLimiterCounters& c,
                            std::uint64_t n);

  RateLimiterConfig config_;
  RateLimiterCounters counters_;
};

}  // namespace replayd
