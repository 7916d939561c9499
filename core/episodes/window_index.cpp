#include "core/episodes/window_index.h"

#include <algorithm>
#include <cmath>

#include "core/selectors/prioritized_selector.h"
#include "core/selectors/uniform_selector.h"

namespace replayd {

WindowIndex::WindowIndex(const WindowSpec& spec, const WindowContext& context, bool scan)
    : spec_(spec), context_(context), member_(context.storage->capacity(), 0) {
  const std::uint32_t capacity = context.storage->capacity();
  if (context.prioritized) {
    selector_ = std::make_unique<PrioritizedSelector>(capacity, context.priority_exponent);
  } else {
    selector_ = std::make_unique<UniformSelector>(capacity);
  }
  if (scan) this->scan();
}

void WindowIndex::scan() {
  const std::uint32_t capacity = context_.storage->capacity();
  std::vector<std::uint8_t> valid(capacity, 0);
  // missing[i]: steps not stored among positions first .. first + i - 1 of the episode.
  std::vector<std::uint32_t> missing;
  context_.episodes->for_each_unordered([&](std::uint64_t, const Episode& episode) {
    const std::uint64_t first = episode.first;
    const std::uint64_t length = episode.length;
    missing.assign(1, 0);
    for (const std::uint32_t slot : episode.slots)
      missing.push_back(missing.back() + (slot == EpisodeIndex::kNoSlot ? 1 : 0));
    // Steps not stored among positions [lo, end), end <= length: those before `first`
    // (evicted or never stored) and the gaps after it.
    const auto missing_in = [&](std::uint64_t lo, std::uint64_t end) {
      const std::uint64_t from = std::max(lo, first);
      return (lo < first ? first - lo : 0) + missing[end - first] - missing[from - first];
    };
    for (std::uint64_t p = first; p < length; ++p) {
      const std::uint32_t slot = episode.slots[static_cast<std::size_t>(p - first)];
      if (slot == EpisodeIndex::kNoSlot || p % spec_.stride != 0) continue;
      if (context_.next_of && episode.ended() && p + 1 == length) continue;
      if (!context_.pad_history && p < spec_.backward) continue;
      std::uint64_t end = p + spec_.forward;  // one past the window's last position
      if (end > length) {
        if (!spec_.allow_short || !episode.ended()) continue;
        end = length;
      }
      const std::uint64_t lo = p >= spec_.backward ? p - spec_.backward : 0;
      valid[slot] = missing_in(lo, end) == 0 ? 1 : 0;
    }
  });
  for (std::uint32_t slot = 0; slot < capacity; ++slot) {
    if (!valid[slot]) continue;
    if (context_.max_times_sampled != 0 &&
        context_.storage->times_sampled(slot) >= context_.max_times_sampled) {
      continue;
    }
    add(slot);
  }
}

std::uint32_t WindowIndex::count_valid() const {
  std::uint32_t valid = 0;
  for (std::uint32_t slot = 0; slot < context_.storage->capacity(); ++slot) {
    if (context_.storage->occupied(slot) && is_valid(slot)) ++valid;
  }
  return valid;
}

double WindowIndex::priority_of(std::uint32_t slot) const {
  return context_.prioritized ? context_.storage->priority(slot) : 1.0;
}

std::uint64_t WindowIndex::draws_of(std::uint32_t slot) const {
  if (context_.max_times_sampled == 0) return 0;
  return context_.max_times_sampled - context_.storage->times_sampled(slot);
}

bool WindowIndex::is_valid(std::uint32_t slot) const {
  if (context_.max_times_sampled != 0 &&
      context_.storage->times_sampled(slot) >= context_.max_times_sampled) {
    return false;
  }
  const StepRef ref = context_.episodes->step(slot);
  const Episode* episode = context_.episodes->find(ref.episode);
  const std::uint64_t p = ref.position;
  if (p % spec_.stride != 0) return false;
  if (context_.next_of && episode->ended() && p + 1 == episode->length) return false;
  if (!context_.pad_history && p < spec_.backward) return false;
  const std::uint64_t back_from = p >= spec_.backward ? p - spec_.backward : 0;
  std::uint64_t end = p + spec_.forward;  // one past the window's last position
  if (end > episode->length) {
    if (!spec_.allow_short || !episode->ended()) return false;
    end = episode->length;
  }
  // Steps [back_from, end) must all be stored: none is before the first stored one, and from
  // stored_from on every one is (the common case: eviction takes episodes from the front),
  // so only a window reaching back over a gap is checked step by step.
  if (back_from < episode->first) return false;
  if (back_from >= episode->stored_from) return true;
  for (std::uint64_t q = back_from; q < end; ++q) {
    if (EpisodeIndex::slot_at(*episode, q) == EpisodeIndex::kNoSlot) return false;
  }
  return true;
}

void WindowIndex::refresh(std::uint32_t slot) {
  const bool valid = is_valid(slot);
  if (valid && !contains(slot)) {
    add(slot);
  } else if (!valid && contains(slot)) {
    drop(slot);
  }
}

void WindowIndex::add(std::uint32_t slot) {
  selector_->insert(slot, priority_of(slot));
  member_[slot] = 1;
  ++size_;
  draws_left_ += draws_of(slot);
}

void WindowIndex::drop(std::uint32_t slot) {
  selector_->remove(slot);
  member_[slot] = 0;
  --size_;
  draws_left_ -= draws_of(slot);
}

void WindowIndex::on_append(std::uint32_t slot) {
  // Appending position p completes exactly one forward window: the one starting at
  // p - forward + 1. No backward window can gain from a later step.
  const StepRef ref = context_.episodes->step(slot);
  if (ref.position + 1 < spec_.forward) return;
  const Episode* episode = context_.episodes->find(ref.episode);
  const std::uint32_t start =
      EpisodeIndex::slot_at(*episode, ref.position + std::uint64_t{1} - spec_.forward);
  if (start != EpisodeIndex::kNoSlot) refresh(start);
}

void WindowIndex::on_end(const Episode& episode) {
  // Ending makes short windows valid: starts p in [length - forward + 1, length - 1].
  if (episode.length == 0) return;
  if (context_.next_of) {  // the last step becomes the final observation: no start
    const std::uint32_t last = EpisodeIndex::slot_at(episode, episode.length - 1);
    if (last != EpisodeIndex::kNoSlot) refresh(last);
  }
  if (!spec_.allow_short) return;
  const std::uint64_t n = episode.length;
  const std::uint64_t lowest = n >= spec_.forward ? n - spec_.forward + 1 : 0;
  for (std::uint64_t p = n; p-- > lowest;) {
    const std::uint32_t slot = EpisodeIndex::slot_at(episode, p);
    if (slot == EpisodeIndex::kNoSlot) break;  // every earlier short window holds this hole
    refresh(slot);
  }
}

void WindowIndex::on_remove(std::uint32_t slot, const StepRef& ref, const Episode& episode) {
  // Starts whose forward window holds p: [p - forward + 1, p]; whose backward window holds
  // p: [p + 1, p + backward]. Every one of them becomes invalid. Only stored positions
  // ([first, length) of the episode) can be starts: evicting an episode's oldest step looks
  // at its backward window's starts only, not at a forward window's worth of positions.
  const std::uint64_t p = ref.position;
  const std::uint64_t from =
      std::max<std::uint64_t>(p + 1 >= spec_.forward ? p + 1 - spec_.forward : 0, episode.first);
  const std::uint64_t to =
      std::min<std::uint64_t>(p + spec_.backward, std::uint64_t{episode.length} - 1);  // inclusive
  for (std::uint64_t q = from; q <= to; ++q) {
    const std::uint32_t start = q == p ? slot : EpisodeIndex::slot_at(episode, q);
    if (start != EpisodeIndex::kNoSlot && contains(start)) drop(start);
  }
}

void WindowIndex::on_priority(std::uint32_t slot) {
  if (contains(slot) && context_.prioritized) selector_->update(slot, priority_of(slot));
}

void WindowIndex::on_sampled(std::uint32_t slot) {
  // Called after times_sampled grew by one.
  if (context_.max_times_sampled == 0 || !contains(slot)) return;
  --draws_left_;
  if (context_.storage->times_sampled(slot) >= context_.max_times_sampled) {
    selector_->remove(slot);
    member_[slot] = 0;
    --size_;
  }
}

void WindowIndex::clear() {
  selector_->clear();
  std::fill(member_.begin(), member_.end(), 0);
  size_ = 0;
  draws_left_ = 0;
}

WindowIndex* WindowIndexSet::get(const WindowSpec& spec) {
  ++uses_;
  for (std::size_t i = 0; i < indexes_.size(); ++i) {
    if (indexes_[i]->spec() == spec) {
      last_used_[i] = uses_;
      return indexes_[i].get();
    }
  }
  if (indexes_.size() >= kMaxIndexes) {
    const auto oldest = std::min_element(last_used_.begin(), last_used_.end()) - last_used_.begin();
    indexes_.erase(indexes_.begin() + oldest);  // freed before the new one is built
    last_used_.erase(last_used_.begin() + oldest);
  }
  indexes_.push_back(std::make_unique<WindowIndex>(spec, context_));
  last_used_.push_back(uses_);
  return indexes_.back().get();
}

WindowIndex& WindowIndexSet::add_empty(const WindowSpec& spec) {
  indexes_.push_back(std::make_unique<WindowIndex>(spec, context_, false));
  last_used_.push_back(++uses_);
  return *indexes_.back();
}

void WindowIndexSet::on_append(std::uint32_t slot) {
  for (auto& index : indexes_)
    index->on_append(slot);
}
void WindowIndexSet::on_end(const Episode& episode) {
  for (auto& index : indexes_)
    index->on_end(episode);
}
void WindowIndexSet::on_remove(std::uint32_t slot, const StepRef& ref, const Episode& episode) {
  for (auto& index : indexes_)
    index->on_remove(slot, ref, episode);
}
void WindowIndexSet::on_priority(std::uint32_t slot) {
  for (auto& index : indexes_)
    index->on_priority(slot);
}
void WindowIndexSet::on_sampled(std::uint32_t slot) {
  for (auto& index : indexes_)
    index->on_sampled(slot);
}
void WindowIndexSet::clear() {
  indexes_.clear();
  last_used_.clear();
}

}  // namespace replayd
