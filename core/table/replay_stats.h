// ReplayStats: what a table observes about the replay itself (how old the items it hands out
// are, how often an item was drawn before it left, how stale priority updates are), kept as
// plain power-of-two histograms that the metrics exporter reads at scrape time.
// Owned by its Table; every add is O(1) (a bit_width and an increment), no allocation.
// Time: core reads no clock. The service stamps the table with a monotonic "now" in
// milliseconds (Table::set_now_ms) before a request that stores or draws; 0 means "unknown".
// Threading: as Table (io_context thread only).
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace replayd {

// Counts of non-negative integers in N buckets: bucket 0 holds 0, bucket b (1 <= b < N-1)
// holds (2^(b-2), 2^(b-1)] (so 1, 2, 3..4, 5..8, ...), bucket N-1 everything larger.
// upper_bound(b) = 0, 1, 2, 4, 8, ..., 2^(N-3), +inf: the Prometheus `le` of each bucket.
template <std::size_t N>
struct Log2Histogram {
  static_assert(N >= 3 && N <= 64);
  static constexpr std::size_t kBuckets = N;
  std::array<std::uint64_t, N> buckets{};
  std::uint64_t count = 0;
  std::uint64_t sum = 0;  // exact; wraps only past 2^64 (never for these quantities)

  static constexpr std::size_t bucket_of(std::uint64_t value) {
    if (value == 0) return 0;
    const std::size_t b = static_cast<std::size_t>(std::bit_width(value - 1)) + 1;
    return b < N - 1 ? b : N - 1;
  }
  // The inclusive upper bound of bucket b; +inf for the last.
  static double upper_bound(std::size_t b) {
    if (b == 0) return 0;
    if (b == N - 1) return INFINITY;
    return std::ldexp(1.0, static_cast<int>(b) - 1);
  }
  void add(std::uint64_t value) {
    ++buckets[bucket_of(value)];
    ++count;
    sum += value;
  }
  // The q-quantile (0 <= q <= 1) estimated as Prometheus' histogram_quantile does: linear
  // within the bucket that holds it; the last finite bound when it falls in the +inf bucket.
  // 0 for an empty histogram.
  double quantile(double q) const {
    if (count == 0) return 0;
    const double rank = q * static_cast<double>(count);
    std::uint64_t below = 0;
    for (std::size_t b = 0; b < N; ++b) {
      if (buckets[b] == 0 || static_cast<double>(below + buckets[b]) < rank) {
        below += buckets[b];
        continue;
      }
      if (b == 0) return 0;
      if (b == N - 1) return upper_bound(N - 2);
      const double lo = upper_bound(b - 1);
      const double hi = upper_bound(b);
      const double into = (rank - static_cast<double>(below)) / static_cast<double>(buckets[b]);
      return lo + (hi - lo) * into;
    }
    return upper_bound(N - 2);
  }
};

// Priorities (finite, >= 0) in power-of-two buckets: bucket 0 holds 0, bucket b holds
// (2^(b-2-kOffset), 2^(b-1-kOffset)] with everything at or below 2^-kOffset in bucket 1 and
// everything above 2^kOffset in the last (+inf). So `le` = 0, 2^-20, ..., 2^20, +inf.
struct PriorityHistogram {
  static constexpr int kOffset = 20;
  static constexpr std::size_t kBuckets = 2 * kOffset + 3;
  std::array<std::uint64_t, kBuckets> buckets{};
  std::uint64_t count = 0;
  double sum = 0;

  // Reads the IEEE-754 exponent and mantissa bits (no libm call): p = 1.m * 2^e, so the
  // smallest k with p <= 2^k is e when the mantissa is 0 (a power of two), else e + 1.
  static std::size_t bucket_of(double p) {
    if (!(p > 0)) return 0;
    const auto bits = std::bit_cast<std::uint64_t>(p);
    const int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;  // subnormals: below 2^-20
    const int k = (bits & ((std::uint64_t{1} << 52) - 1)) == 0 ? e : e + 1;
    if (k <= -kOffset) return 1;
    if (k > kOffset) return kBuckets - 1;
    return static_cast<std::size_t>(k + kOffset + 1);
  }
  static double upper_bound(std::size_t b) {
    if (b == 0) return 0;
    if (b == kBuckets - 1) return INFINITY;
    return std::ldexp(1.0, static_cast<int>(b) - 1 - kOffset);
  }
  void add(double p) {
    ++buckets[bucket_of(p)];
    ++count;
    sum += p;
  }
};

// The histograms and counters of one table; copied out by Table::info() (about 2.5 KB).
struct ReplayHistograms {
  // Draws (sample, n-step and sequence starts): the drawn item's age in items inserted after
  // it (the newest item has age 0), and in milliseconds since it was stored (draws of items
  // whose store time is unknown, such as items restored from a snapshot, are not counted).
  Log2Histogram<34> sample_age_inserts;
  Log2Histogram<34> sample_age_ms;
  PriorityHistogram sample_priority;  // the drawn item's priority at the draw
  // Items leaving the table (eviction, expiration, delete, reset): times each was sampled.
  Log2Histogram<24> times_sampled_at_removal;
  // update_priorities of a stored key: the key's age in items inserted after it.
  Log2Histogram<34> update_age_inserts;
  // Episodic tables: steps of each episode when it ends; and per n-step or sequence draw,
  // the drawn episode's age in episodes opened after it (the newest episode has age 0).
  Log2Histogram<26> episode_length_steps;
  Log2Histogram<26> draw_episode_age;
  // Draws of a table that follows a published value, once its version is known: the drawn
  // item's staleness, the value's version less the item's (0 when the item is newer).
  Log2Histogram<26> sample_staleness_versions;
  std::uint64_t resets = 0;       // reset_table calls
  std::uint64_t reset_items = 0;  // items removed by them
};

// Per-slot store stamps plus the histograms. Memory: kBytesPerSlot per slot of capacity,
// counted in table_bytes() as "replay stats".
class ReplayStats {
 public:
  // What a draw needs of an item, in one 16-byte record per slot so that a draw reads one
  // cache line: its insert ordinal, store time and priority. Items restored from a snapshot
  // have no stamp (ms 0, priority NaN): the caller passes their priority from storage.
  struct Stamp {
    std::uint64_t ordinal = 0;
    std::uint32_t ms = 0;  // now_ms - epoch + 1 when stored (saturates after 49 days); 0 unknown
    float priority = NAN;  // as stored or last updated; NaN unknown
  };
  static constexpr std::uint64_t kBytesPerSlot = sizeof(Stamp);
  static_assert(sizeof(Stamp) == 16);

  explicit ReplayStats(std::uint32_t capacity) : stamps_(new Stamp[capacity]()) {}

  // The item in `slot` is the table's insert number `ordinal` (0-based), stored at now_ms.
  void on_store(std::uint32_t slot, std::uint64_t ordinal, std::uint64_t now_ms, double priority) {
    if (epoch_ms_ == 0) epoch_ms_ = now_ms;
    stamps_[slot] = Stamp{ordinal, relative_ms(now_ms), static_cast<float>(priority)};
  }
  // Asks the CPU to fetch the stamp of `slot` ahead of on_draw (a hint; no effect on results).
  void prefetch(std::uint32_t slot) const { __builtin_prefetch(&stamps_[slot]); }
  // Whether the stamp of `slot` knows the item's priority (false for restored items).
  bool knows_priority(std::uint32_t slot) const { return !std::isnan(stamps_[slot].priority); }
  // The item in `slot` was drawn; `inserts` items were inserted so far. `stored_priority`
  // is used only when the stamp does not know the priority (see knows_priority).
  void on_draw(std::uint32_t slot, std::uint64_t inserts, std::uint64_t now_ms,
               double stored_priority = NAN) {
    const Stamp stamp = stamps_[slot];
    histograms_.sample_age_inserts.add(age(stamp, inserts));
    const std::uint32_t now = relative_ms(now_ms);
    if (stamp.ms != 0 && now >= stamp.ms) histograms_.sample_age_ms.add(now - stamp.ms);
    histograms_.sample_priority.add(std::isnan(stamp.priority) ? stored_priority : stamp.priority);
  }
  // update_priorities set the priority of the stored item in `slot`.
  void on_update(std::uint32_t slot, std::uint64_t inserts, double priority) {
    histograms_.update_age_inserts.add(age(stamps_[slot], inserts));
    stamps_[slot].priority = static_cast<float>(priority);
  }
  void on_remove(std::uint32_t times_sampled) {
    histograms_.times_sampled_at_removal.add(times_sampled);
  }
  void on_episode_end(std::uint64_t length_steps) {
    histograms_.episode_length_steps.add(length_steps);
  }
  void on_draw_staleness(std::uint64_t versions_behind) {
    histograms_.sample_staleness_versions.add(versions_behind);
  }
  void on_episode_draw(std::uint64_t age_episodes) {
    histograms_.draw_episode_age.add(age_episodes);
  }
  void on_reset(std::uint64_t items) {
    ++histograms_.resets;
    histograms_.reset_items += items;
  }

  const ReplayHistograms& histograms() const { return histograms_; }

 private:
  static std::uint64_t age(const Stamp& stamp, std::uint64_t inserts) {
    return inserts > stamp.ordinal ? inserts - stamp.ordinal - 1 : 0;
  }
  std::uint32_t relative_ms(std::uint64_t now_ms) const {
    if (now_ms == 0 || epoch_ms_ == 0 || now_ms < epoch_ms_) return 0;
    const std::uint64_t relative = now_ms - epoch_ms_ + 1;
    return relative < UINT32_MAX ? static_cast<std::uint32_t>(relative) : UINT32_MAX;
  }

  std::unique_ptr<Stamp[]> stamps_;  // per slot
  std::uint64_t epoch_ms_ = 0;       // the first now_ms an item was stored at
  ReplayHistograms histograms_;
};

}  // namespace replayd
