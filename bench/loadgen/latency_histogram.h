// LatencyHistogram: request latencies in nanoseconds, log-linear buckets (16 per power of
// two: values are kept within 6.25%), fixed size and trivially copyable so a worker process
// can send it to the parent through a pipe as raw bytes. Not thread-safe; one per worker.
#pragma once

#include <array>
#include <cstdint>

namespace replayd::loadgen {

class LatencyHistogram {
 public:
  // Counts one latency. O(1), no allocation. Values above ~2^44 ns (4.9 h) land in the last bucket.
  void record(std::uint64_t nanoseconds);
  // Adds every count of `other`. O(buckets).
  void merge(const LatencyHistogram& other);
  std::uint64_t count() const { return total_; }
  // The latency at quantile q (0..1) in microseconds: the midpoint of the bucket holding
  // it; 0 when empty. O(buckets).
  double quantile_us(double q) const;

 private:
  static constexpr unsigned kSubBits = 4;
  static constexpr std::size_t kSub = std::size_t{1} << kSubBits;
  static constexpr std::size_t kBuckets = 42 * kSub;

  static std::size_t bucket_of(std::uint64_t nanoseconds);
  static double bucket_mid_ns(std::size_t bucket);

  std::array<std::uint64_t, kBuckets> counts_{};
  std::uint64_t total_ = 0;
};

}  // namespace replayd::loadgen
