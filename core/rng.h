// Rng: xoshiro256** seeded through splitmix64. Small, fast, and its whole state is four
// words, so a snapshot can save and restore it exactly. Not thread-safe; one per table.
#pragma once

#include <array>
#include <cstdint>

namespace replayd {

// GCC/Clang 128-bit integer; __extension__ keeps -Wpedantic quiet.
__extension__ using uint128 = unsigned __int128;

class Rng {
 public:
  using State = std::array<std::uint64_t, 4>;

  explicit Rng(std::uint64_t seed = 0) { reseed(seed); }

  void reseed(std::uint64_t seed) {
    for (auto& word : state_) {
      seed += 0x9e3779b97f4a7c15ULL;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      word = z ^ (z >> 31);
    }
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform_double() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform in [0, bound), bound >= 1, without modulo bias (Lemire's method).
  std::uint64_t uniform_below(std::uint64_t bound) {
    uint128 product = static_cast<uint128>(next()) * bound;
    auto low = static_cast<std::uint64_t>(product);
    if (low < bound) {
      const std::uint64_t threshold = -bound % bound;
      while (low < threshold) {
        product = static_cast<uint128>(next()) * bound;
        low = static_cast<std::uint64_t>(product);
      }
    }
    return static_cast<std::uint64_t>(product >> 64);
  }

  const State& state() const { return state_; }
  void set_state(const State& state) { state_ = state; }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  State state_{};
};

}  // namespace replayd
