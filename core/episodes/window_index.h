// WindowIndex: the set of valid start steps for one window requirement of an episodic table,
// kept up to date as steps are stored, episodes end, steps are removed and priorities
// change, so that a draw is one selector pick and nothing is rebuilt per sample.
// WindowIndexSet: the table's indexes, one per distinct requirement, created on first use.
// Owned by the table; borrows its Storage and EpisodeIndex. Not thread-safe.
//
// A step at position p of episode e is a valid start for WindowSpec w when (all of):
//   - p % w.stride == 0;
//   - the steps at positions max(0, p - w.backward) .. p - 1 of e are stored (and, in a
//     table without history padding, p >= w.backward);
//   - forward: the steps p .. p + w.forward - 1 of e are stored; or, when w.allow_short and
//     e has ended with length n < p + w.forward, the steps p .. n - 1 are stored;
//   - it has been sampled fewer than max_times_sampled times (when that is not 0);
//   - in a table with next_of fields, it is not the last step of an ended episode (that
//     step holds the episode's final observation, not a transition: docs/PIXELS.md).
// Draws: in a uniform table every valid start has P = 1/N, drawn in O(1) from a dense set
// whose order follows history; in a prioritized table P = priority^alpha / total from a sum
// tree laid out by slot (uniform over the dense member order when every mass is 0). The
// member order is what a snapshot saves (for_each_member) so that a restored table draws
// exactly as the original.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/episodes/episode_index.h"
#include "core/rng.h"
#include "core/selectors/selector.h"
#include "core/storage/storage.h"
#include "core/table/table_config.h"

namespace replayd {

struct WindowSpec {
  std::uint32_t forward = 1;   // steps from the start on, the start included; >= 1
  bool allow_short = false;    // an ended episode may cut the forward window short
  std::uint32_t stride = 1;    // starts are positions divisible by stride; >= 1
  std::uint32_t backward = 0;  // steps before the start that must be stored (or precede
                               // the episode's first step)
  bool operator==(const WindowSpec&) const = default;
};

// What the indexes read from the table.
struct WindowContext {
  const Storage* storage = nullptr;
  const EpisodeIndex* episodes = nullptr;
  bool prioritized = false;
  double priority_exponent = 1.0;       // prioritized only
  std::uint32_t max_times_sampled = 0;  // 0 = never retire a start
  bool next_of = false;                 // an ended episode's last step is no start
  bool pad_history = true;              // false: no window looks back before its episode
};

class WindowIndex {
 public:
  // Builds the index from every stored step (O(capacity), whatever the window's size: see
  // scan()), or, with scan = false, empty for the restore path (restore_member).
  WindowIndex(const WindowSpec& spec, const WindowContext& context, bool scan = true);

  const WindowSpec& spec() const { return spec_; }
  std::uint32_t size() const { return size_; }
  // The sampling mass of the valid starts (their count in a uniform table). O(1).
  SamplingMass mass() const { return selector_->mass(size_); }
  // Draws still possible before max_times_sampled retires every start (only kept when
  // max_times_sampled > 0).
  std::uint64_t draws_left() const { return draws_left_; }
  bool contains(std::uint32_t slot) const { return member_[slot] != 0; }
  // Whether the stored `slot` is a valid start by the rule above. O(1), or O(forward +
  // backward) when the window reaches back over a gap inside its episode (a step deleted or
  // evicted out of order).
  bool is_valid(std::uint32_t slot) const;

  // Events, each called after the EpisodeIndex has recorded it:
  // the step in `slot` was stored (as the newest step of its episode). O(1) as is_valid().
  void on_append(std::uint32_t slot);
  // The episode `episode` ended. O(forward) refreshes (each as is_valid()).
  // (Ending drops the last step as a start where next_of says so.)
  void on_end(const Episode& episode);
  // The step `ref`, stored in `slot`, is about to be removed (call before the EpisodeIndex
  // forgets it): every start whose window holds it is dropped. O(stored positions among the
  // forward + backward that could hold it): O(backward) for an episode's oldest step.
  void on_remove(std::uint32_t slot, const StepRef& ref, const Episode& episode);
  // `slot`'s priority or times-sampled count changed. O(log capacity) when prioritized, else O(1).
  void on_priority(std::uint32_t slot);
  void on_sampled(std::uint32_t slot);
  void clear();

  // One draw. Precondition: size() > 0. O(1) uniform, O(log capacity) prioritized.
  Pick sample(Rng& rng, double beta) const { return selector_->sample(rng, beta); }

  // Snapshot support: visits the members in the order that decides future draws; adding
  // them in this order with restore_member to an index built with scan = false rebuilds an
  // identical index. Precondition of restore_member: is_valid(slot), not a member.
  void for_each_member(const std::function<void(std::uint32_t)>& visit) const {
    selector_->for_each_in_order(visit);
  }
  void restore_member(std::uint32_t slot) { refresh(slot); }
  // The number of valid starts by a full scan (restore checks). O(capacity * (L + B)).
  std::uint32_t count_valid() const;

 private:
  // Adds every valid start, in slot order (as refresh() of each slot would, so that draws do
  // not depend on how the index was built). One pass per episode over its stored positions
  // with a running count of missing steps answers each start's window in O(1).
  void scan();
  void refresh(std::uint32_t slot);
  void add(std::uint32_t slot);
  void drop(std::uint32_t slot);
  double priority_of(std::uint32_t slot) const;
  std::uint64_t draws_of(std::uint32_t slot) const;

  WindowSpec spec_;
  WindowContext context_;
  std::unique_ptr<Selector> selector_;
  std::vector<std::uint8_t> member_;
  std::uint32_t size_ = 0;
  std::uint64_t draws_left_ = 0;
};

class WindowIndexSet {
 public:
  static constexpr std::size_t kMaxIndexes = kMaxWindowIndexes;

  explicit WindowIndexSet(const WindowContext& context) : context_(context) {}

  // The index for `spec`, built on first use (O(capacity log capacity)). When kMaxIndexes
  // others exist, the one used least recently is dropped first: a requirement nobody asks
  // for any more (a request that failed or timed out) never holds a place, and no request is
  // refused for want of one. The pointer is valid until the next get() or clear().
  WindowIndex* get(const WindowSpec& spec);
  std::size_t size() const { return indexes_.size(); }
  // Snapshot support: the indexes in creation order; adding an empty one (restore path).
  const WindowIndex& at(std::size_t i) const { return *indexes_[i]; }
  WindowIndex& add_empty(const WindowSpec& spec);

  void on_append(std::uint32_t slot);
  void on_end(const Episode& episode);
  void on_remove(std::uint32_t slot, const StepRef& ref, const Episode& episode);
  void on_priority(std::uint32_t slot);
  void on_sampled(std::uint32_t slot);
  // Drops every index (the table was reset): they are built again when asked for.
  void clear();
  // The sampler's exponent changed: every index is dropped, built again when asked for.
  void set_priority_exponent(double exponent) {
    context_.priority_exponent = exponent;
    clear();
  }

 private:
  WindowContext context_;
  std::vector<std::unique_ptr<WindowIndex>> indexes_;
  std::vector<std::uint64_t> last_used_;  // per index: the get() that last returned it
  std::uint64_t uses_ = 0;
};

}  // namespace replayd
