// The two benchmark transition shapes of docs/BENCHMARKS.md (W1 and W2 of bench/loadgen),
// reduced to what the shared-memory prototype needs: each field's bytes per item, the
// table's capacity and the sample batch. Pure data.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace replayd::shm_proto {

struct Shape {
  std::string name;                       // "W1" or "W2"
  std::vector<std::size_t> field_bytes;   // per field, bytes of one item, in field order
  std::size_t capacity_items = 0;         // W1 100,000, W2 10,000
  std::size_t sample_batch = 0;           // W1 256, W2 32

  std::size_t item_bytes() const {
    std::size_t total = 0;
    for (auto bytes : field_bytes) total += bytes;
    return total;
  }
};

// W1: obs f32[4], act i64, rew f32, next_obs f32[4], done u8 (45 bytes).
inline Shape w1() { return {"W1", {16, 8, 4, 16, 1}, 100'000, 256}; }

// W2: obs u8[4,84,84], act i32, rew f32, next_obs u8[4,84,84], done u8 (56,457 bytes).
inline Shape w2() { return {"W2", {28'224, 4, 4, 28'224, 1}, 10'000, 32}; }

}  // namespace replayd::shm_proto
