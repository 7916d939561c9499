#include "core/table/version_index.h"

namespace replayd {

void VersionIndex::on_store(std::uint32_t slot, std::uint64_t version, double priority) {
  ++counts_[version];
  ++stored_;
  if (cached_ && version >= cached_bound_) ++cached_count_;
  if (eligible_ && version >= eligible_bound_) eligible_->insert(slot, priority);
}

void VersionIndex::on_update(std::uint32_t slot, std::uint64_t version, double priority) {
  if (eligible_ && version >= eligible_bound_) eligible_->update(slot, priority);
}

void VersionIndex::on_remove(std::uint32_t slot, std::uint64_t version) {
  const auto it = counts_.find(version);
  if (--it->second == 0) counts_.erase(it);
  --stored_;
  if (cached_ && version >= cached_bound_) --cached_count_;
  if (eligible_ && version >= eligible_bound_) eligible_->remove(slot);
}

void VersionIndex::clear() {
  counts_.clear();
  stored_ = 0;
  cached_ = false;
  if (eligible_) eligible_->clear();
}

void VersionIndex::count(std::uint64_t version) {
  ++counts_[version];
  ++stored_;
  cached_ = false;
  eligible_.reset();
}

std::uint64_t VersionIndex::count_at_least(std::uint64_t bound) const {
  if (bound == 0) return stored_;
  if (cached_ && cached_bound_ == bound) return cached_count_;
  std::uint64_t count = 0;
  for (auto it = counts_.lower_bound(bound); it != counts_.end(); ++it)
    count += it->second;
  cached_bound_ = bound;
  cached_count_ = count;
  cached_ = true;
  return count;
}

std::optional<std::uint64_t> VersionIndex::min_version() const {
  if (counts_.empty()) return std::nullopt;
  return counts_.begin()->first;
}

std::optional<std::uint64_t> VersionIndex::max_version() const {
  if (counts_.empty()) return std::nullopt;
  return counts_.rbegin()->first;
}

Selector& VersionIndex::rebuild_eligible(std::uint64_t bound, std::unique_ptr<Selector> made) {
  if (!eligible_) eligible_ = std::move(made);
  eligible_->clear();
  eligible_bound_ = bound;
  return *eligible_;
}

}  // namespace replayd
