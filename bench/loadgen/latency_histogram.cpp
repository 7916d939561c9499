#include "latency_histogram.h"

#include <bit>

namespace replayd::loadgen {

std::size_t LatencyHistogram::bucket_of(std::uint64_t ns) {
  if (ns < kSub) return static_cast<std::size_t>(ns);
  const unsigned exponent = static_cast<unsigned>(std::bit_width(ns)) - 1;  // >= kSubBits
  const unsigned shift = exponent - kSubBits;
  const std::size_t sub = static_cast<std::size_t>((ns >> shift) & (kSub - 1));
  const std::size_t bucket = (exponent - kSubBits + 1) * kSub + sub;
  return bucket < kBuckets ? bucket : kBuckets - 1;
}

double LatencyHistogram::bucket_mid_ns(std::size_t bucket) {
  if (bucket < kSub) return static_cast<double>(bucket);
  const unsigned shift = static_cast<unsigned>(bucket / kSub) - 1;
  const double lower = static_cast<double>((kSub + bucket % kSub) << shift);
  const double width = static_cast<double>(std::uint64_t{1} << shift);
  return lower + width / 2;
}

void LatencyHistogram::record(std::uint64_t nanoseconds) {
  ++counts_[bucket_of(nanoseconds)];
  ++total_;
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < kBuckets; ++i)
    counts_[i] += other.counts_[i];
  total_ += other.total_;
}

double LatencyHistogram::quantile_us(double q) const {
  if (total_ == 0) return 0;
  // The smallest bucket whose cumulative count reaches ceil(q * total), at least 1.
  std::uint64_t rank = static_cast<std::uint64_t>(q * static_cast<double>(total_));
  if (static_cast<double>(rank) < q * static_cast<double>(total_)) ++rank;
  if (rank == 0) rank = 1;
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) return bucket_mid_ns(i) / 1000.0;
  }
  return bucket_mid_ns(kBuckets - 1) / 1000.0;
}

}  // namespace replayd::loadgen
