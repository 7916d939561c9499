#include "core/episodes/step_log.h"

namespace replayd {

void StepLog::on_store(std::uint32_t slot) {
  sequence_[slot] = ++last_;
  entries_.push_back(Entry{last_, slot});
}

void StepLog::on_remove(std::uint32_t slot) {
  sequence_[slot] = 0;
  ++dead_;
  while (!entries_.empty() && !live(entries_.front())) {
    entries_.pop_front();
    --dead_;
  }
  if (dead_ > 64 && dead_ > entries_.size() / 2) {  // drop holes left by deletes
    std::erase_if(entries_, [&](const Entry& e) { return !live(e); });
    dead_ = 0;
  }
}

void StepLog::clear() {
  std::fill(sequence_.begin(), sequence_.end(), 0);
  entries_.clear();
  dead_ = 0;
}

void StepLog::restore(std::vector<std::uint64_t> sequences, std::uint64_t last) {
  sequence_ = std::move(sequences);
  last_ = last;
  entries_.clear();
  dead_ = 0;
  for (std::uint32_t slot = 0; slot < sequence_.size(); ++slot) {
    if (sequence_[slot] != 0) entries_.push_back(Entry{sequence_[slot], slot});
  }
  std::sort(entries_.begin(), entries_.end(),
            [](const Entry& a, const Entry& b) { return a.sequence < b.sequence; });
}

}  // namespace replayd
