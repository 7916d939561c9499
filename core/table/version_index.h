// VersionIndex: what a table knows about the policy versions of its stored items, so that a
// sample may be bounded by staleness (only items of version >= a minimum) and a table may
// drop the items behind a version. docs/VERSIONS.md has the rules.
// - A count of stored items per version (an ordered map: a table holds few distinct
//   versions, and consecutive items mostly share one), giving the exact eligible count of a
//   bound in O(versions at or above it); the count of the last bound asked is cached and
//   kept up to date, so asking the same bound again is O(1).
// - An "eligible sampler": a selector of the table sampler's own configuration over exactly
//   the stored items of version >= its bound, so that draws, probabilities and importance
//   weights are those of the sampler restricted to the eligible items. The table builds it
//   on the first draw under a bound that excludes some stored item (O(size log capacity)),
//   and it is kept up to date on every store, priority update and removal while its bound
//   stays; a draw under another bound builds it again. Its memory (selector_bytes of the
//   sampler's kind) is allocated at the first build and counted in the table's bytes.
// Threading: as Table (the owner thread only).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "core/selectors/selector.h"

namespace replayd {

class VersionIndex {
 public:
  // A stored item of `version`; the eligible sampler (when built) takes it if eligible.
  void on_store(std::uint32_t slot, std::uint64_t version, double priority);
  // A stored item's priority changed.
  void on_update(std::uint32_t slot, std::uint64_t version, double priority);
  // A stored item of `version` left the table. Precondition: it was counted (on_store or
  // count_all).
  void on_remove(std::uint32_t slot, std::uint64_t version);
  // Every item left (reset): counts emptied, the eligible sampler emptied (kept allocated).
  void clear();
  // Counts `version` once more, for a rebuild from stored items (snapshot restore); the
  // eligible sampler is dropped, since it no longer matches. O(log versions).
  void count(std::uint64_t version);
  // Drops the eligible sampler (freeing it): the sampler's configuration changed.
  void drop_eligible() { eligible_.reset(); }

  // Stored items of version >= bound. O(1) for the last bound asked, else O(versions >= bound).
  std::uint64_t count_at_least(std::uint64_t bound) const;
  std::uint64_t stored() const { return stored_; }
  // The smallest and largest stored version; nullopt when nothing is stored.
  std::optional<std::uint64_t> min_version() const;
  std::optional<std::uint64_t> max_version() const;
  // Distinct versions stored.
  std::uint64_t distinct_versions() const { return counts_.size(); }

  // The eligible sampler when it is built for `bound`, else nullptr.
  Selector* eligible_for(std::uint64_t bound) const {
    return eligible_ && eligible_bound_ == bound ? eligible_.get() : nullptr;
  }
  // The eligible sampler, emptied, to be filled for `bound`: the caller inserts every stored
  // item of version >= bound. `made` (a new empty selector) is taken when none is held, and
  // may be null otherwise.
  Selector& rebuild_eligible(std::uint64_t bound, std::unique_ptr<Selector> made);
  bool holds_eligible() const { return eligible_ != nullptr; }
  std::uint64_t eligible_bytes() const { return eligible_ ? eligible_->allocated_bytes() : 0; }

 private:
  std::map<std::uint64_t, std::uint64_t> counts_;  // version -> stored items of it
  std::uint64_t stored_ = 0;
  // The last bound count_at_least was asked about, and its answer kept up to date.
  mutable std::uint64_t cached_bound_ = 0;
  mutable std::uint64_t cached_count_ = 0;
  mutable bool cached_ = false;
  std::unique_ptr<Selector> eligible_;  // over the stored items of version >= eligible_bound_
  std::uint64_t eligible_bound_ = 0;
};

}  // namespace replayd
