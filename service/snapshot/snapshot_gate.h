// SnapshotGate: tells a table's file tier whether a snapshot is being written, so that it
// deletes no segment file meanwhile (the snapshot's writer links the segments its image
// refers to: service/snapshot/segment_links.h); what the tier held back runs when the write
// ends. Shared by the Snapshotter and the file tiers (either may go first: a Snapshotter
// ending opens the gate for good).
// Threading: the io_context thread (and the server's thread after it stopped).
#pragma once

#include <functional>
#include <utility>
#include <vector>

namespace replayd::service {

class SnapshotGate {
 public:
  bool writing() const { return writing_; }
  // Runs `job` now, or, while a snapshot is written, when it ends.
  void after_writing(std::function<void()> job) {
    if (writing_) {
      held_.push_back(std::move(job));
    } else {
      job();
    }
  }
  void begin() { writing_ = true; }
  // The write ended (done, failed or abandoned): runs what was held back.
  void end() {
    writing_ = false;
    std::vector<std::function<void()>> held = std::move(held_);
    held_.clear();
    for (auto& job : held)
      job();
  }

 private:
  bool writing_ = false;
  std::vector<std::function<void()>> held_;
};

}  // namespace replayd::service
