// Workload: the benchmark transition shapes of docs/BENCHMARKS.md (W1: small vectors,
// W2: Atari frames; W3: Atari-like episodes of single frames, stacked and compressed by the
// episodic table's frame fields), the table description a run creates, and insert batches filled
// with random values. Pure data; each process builds its own.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "replayd_client/columns.h"
#include "replayd_client/dtype.h"

namespace replayd::loadgen {

struct FieldSpec {
  std::string name;
  client::DType dtype;
  std::vector<std::uint64_t> shape;  // the item's shape, {} for a scalar
  std::uint64_t item_bytes = 0;      // dtype bytes * prod(shape)
};

struct Workload {
  std::string name;  // "W1", "W2" or "W3"
  // W3: steps of an episodic table written with EpisodeWriter; its first field (obs) is a
  // frame field: stack 4, next_of, zstd.
  bool episodic = false;
  std::vector<FieldSpec> fields;
  std::uint64_t item_bytes = 0;            // sum over fields: W1 45, W2 56,457
  std::uint64_t capacity_items = 0;        // W1 100,000, W2 10,000
  std::uint64_t default_sample_batch = 0;  // W1 256, W2 32
};

// The workload named "W1", "W2" or "W3". Throws std::invalid_argument for another name.
Workload workload_named(const std::string& name);

// The table description (docs/CONFIG.md) for `workload`: FIFO remover, min_size(1) rate
// limiter (nothing ever waits once an item exists), uniform or prioritized (exponent 0.6).
boost::json::object table_description(const Workload& workload, const std::string& table,
                                      bool prioritized);

// `n` items of random bytes per field, and an InsertBatch that borrows them. The batch
// is valid while this object lives and is not moved. O(n * item_bytes) to build.
class RandomBatch {
 public:
  RandomBatch(const Workload& workload, std::uint64_t n, std::uint64_t seed);
  RandomBatch(const RandomBatch&) = delete;
  RandomBatch& operator=(const RandomBatch&) = delete;
  const client::InsertBatch& batch() const { return batch_; }
  // The items' bytes, one column per field (n * item_bytes each).
  const std::vector<std::vector<std::byte>>& columns() const { return columns_; }

 private:
  std::vector<std::vector<std::byte>> columns_;
  client::InsertBatch batch_;
};

}  // namespace replayd::loadgen
