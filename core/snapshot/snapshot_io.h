// SnapshotSink / SnapshotSource: the narrow byte-stream interface through which the snapshot
// codec (core/snapshot/table_snapshot.h) writes and reads. core/ never opens files itself: the server
// passes file-backed implementations (service/snapshot/snapshot_files.h); tests pass the in-memory
// ones below, or their own that fail on purpose. Not thread-safe; one user at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "core/result.h"

namespace replayd {

class SnapshotSink {
 public:
  virtual ~SnapshotSink() = default;
  // Appends all of `bytes`. An error (disk full, I/O error) names the problem; what was
  // appended before stays appended, and the codec stops at the first error.
  virtual Status write(std::span<const std::byte> bytes) = 0;
};

class SnapshotSource {
 public:
  virtual ~SnapshotSource() = default;
  // Fills `out` with the next bytes. Returns how many were read: out.size(), or fewer only
  // at the end of the data (0 when nothing is left). An I/O error names the problem.
  virtual Result<std::size_t> read(std::span<std::byte> out) = 0;
};

// Appends to a byte vector it owns. Never fails.
class MemorySink final : public SnapshotSink {
 public:
  Status write(std::span<const std::byte> bytes) override {
    data_.insert(data_.end(), bytes.begin(), bytes.end());
    return Ok{};
  }
  const std::vector<std::byte>& data() const { return data_; }
  std::vector<std::byte>& data() { return data_; }

 private:
  std::vector<std::byte> data_;
};

// Reads a borrowed byte span, which must outlive the source. Never fails.
class MemorySource final : public SnapshotSource {
 public:
  explicit MemorySource(std::span<const std::byte> data) : data_(data) {}
  Result<std::size_t> read(std::span<std::byte> out) override {
    const std::size_t n = std::min(out.size(), data_.size() - position_);
    if (n > 0) std::memcpy(out.data(), data_.data() + position_, n);
    position_ += n;
    return n;
  }

 private:
  std::span<const std::byte> data_;
  std::size_t position_ = 0;
};

}  // namespace replayd
