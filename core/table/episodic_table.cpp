// The episodic part's operations (docs/TRAJECTORIES.md): opening, appending to and ending
// episodes, and n-step and sequence samples over the window indexes.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "core/episodes/nstep.h"
#include "core/number_text.h"
#include "core/storage/copy_cell.h"
#include "core/storage/zstd_value.h"
#include "core/table/episodic_table.h"

namespace replayd {
namespace {

// Draws picked ahead of their copies in n-step samples.
constexpr std::uint64_t kPickAhead = 16;

Error invalid(const std::string& table, std::string message) {
  return make_error(ErrorCode::invalid_argument, "table '" + table + "': " + std::move(message));
}

Status check_beta(const std::string& table, double beta) {
  if (!std::isfinite(beta) || beta < 0) {
    return invalid(table, "beta must be finite and >= 0, got " + std::to_string(beta));
  }
  return Ok{};
}

}  // namespace

EpisodicTable::EpisodicTable(Table& items) : items_(items) {
  const TableConfig& config = items_.config_;
  const std::uint32_t history = config.episodes.pad_history ? 0 : config.schema.max_stack() - 1;
  episodes_ = std::make_unique<EpisodeIndex>(config.capacity, history);
  WindowContext context;
  context.storage = &items_.storage_;
  context.episodes = episodes_.get();
  context.prioritized = config.sampler.kind == SelectorKind::prioritized;
  context.priority_exponent = config.sampler.priority_exponent;
  context.max_times_sampled = config.max_times_sampled;
  context.next_of = config.schema.has_next_of();
  context.pad_history = config.episodes.pad_history;
  windows_ = std::make_unique<WindowIndexSet>(context);
  complete_ = std::make_unique<CompleteEpisodes>(config.capacity);
  step_log_ = std::make_unique<StepLog>(config.capacity);
  reward_field_ = config.schema.find(config.episodes.reward_field);
  for (const auto& name : config.episodes.bootstrap_fields)
    bootstrap_fields_.push_back(config.schema.find(name));
}

const std::string& EpisodicTable::name() const {
  return items_.name();
}

void EpisodicTable::on_remove(std::uint32_t slot) {
  const StepRef ref = episodes_->step(slot);
  const Episode& episode = *episodes_->find(ref.episode);
  windows_->on_remove(slot, ref, episode);
  complete_->on_remove(episode);
  step_log_->on_remove(slot);
  episodes_->remove(slot);
}

void EpisodicTable::on_priority(std::uint32_t slot) {
  windows_->on_priority(slot);
}

void EpisodicTable::clear() {
  episodes_->remove_all_steps();
  windows_->clear();
  complete_->clear();
  step_log_->clear();
}

Result<std::uint64_t> EpisodicTable::open_episode(std::uint64_t writer) {
  if (episodes_->open_count() >= kMaxOpenEpisodes) {
    return make_error(ErrorCode::resource_exhausted, "table '" + name() +
                                                         "': " + std::to_string(kMaxOpenEpisodes) +
                                                         " episodes are open already");
  }
  return episodes_->open(writer);
}

Status EpisodicTable::append_steps(std::uint64_t writer, std::span<const std::uint64_t> episodes,
                                   std::span<const std::span<const std::byte>> columns,
                                   std::uint64_t n, std::span<const double> priorities,
                                   std::span<std::uint64_t> keys_out,
                                   std::span<const std::span<const std::uint32_t>> frame_sizes,
                                   std::span<const std::uint64_t> versions) {
  REPLAYD_RETURN_IF_ERROR(items_.check_rows(columns, n, priorities, keys_out, frame_sizes));
  REPLAYD_RETURN_IF_ERROR(items_.check_versions(versions, n));
  if (episodes.size() != n) {
    return invalid(name(), std::to_string(episodes.size()) + " episode ids for " +
                               std::to_string(n) + " steps");
  }
  for (std::size_t i = 0; i < episodes.size(); ++i) {
    const Episode* episode = episodes_->find(episodes[i]);
    if (episode == nullptr || episode->ended() || episode->writer != writer) {
      return invalid(name(), "step " + std::to_string(i) + ": episode " +
                                 std::to_string(episodes[i]) + " is not open for this writer");
    }
    // n <= capacity < 2^32, so one check per batch bounds every episode's growth.
    if (episode->length > EpisodeIndex::kMaxEpisodeLength - n) {
      return invalid(name(), "episode " + std::to_string(episodes[i]) + " would exceed " +
                                 std::to_string(EpisodeIndex::kMaxEpisodeLength) + " steps");
    }
  }
  if (!items_.rate_limiter_.may_insert(n)) {
    return make_error(ErrorCode::would_block,
                      "table '" + name() + "': insert held by rate limiter");
  }
  std::array<std::uint64_t, Schema::kMaxFields> frame_offsets{};
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint32_t slot =
        items_.store_row(columns, i, priorities, frame_sizes,
                         std::span(frame_offsets).first(columns.size()), versions);
    episodes_->append(episodes[i], slot);
    step_log_->on_store(slot);
    windows_->on_append(slot);
    keys_out[i] = items_.storage_.key(slot);
  }
  items_.rate_limiter_.record_inserts(n);
  items_.counters_.inserts += n;
  return Ok{};
}

Status EpisodicTable::append_final_values(
    std::uint64_t episode, std::span<const std::span<const std::byte>> final_values) {
  const auto& fields = items_.config_.schema.fields();
  if (!items_.config_.schema.has_next_of()) {
    return invalid(name(), "a final observation was given, but no field is next_of");
  }
  if (final_values.size() != fields.size()) {
    return invalid(name(), "final observation: " + std::to_string(final_values.size()) +
                               " values for " + std::to_string(fields.size()) + " fields");
  }
  // One row: the next_of fields' values, zeros (no frame) elsewhere.
  std::uint64_t zero_bytes = 0;
  for (const auto& field : fields)
    zero_bytes = std::max(zero_bytes, field.item_bytes());
  const std::vector<std::byte> zeros(zero_bytes);
  std::vector<std::span<const std::byte>> columns(fields.size());
  std::vector<std::uint32_t> sizes(fields.size(), 0);
  std::vector<std::span<const std::uint32_t>> frame_sizes(fields.size());
  std::uint64_t cost = 0;
  for (std::size_t f = 0; f < fields.size(); ++f) {
    const Field& field = fields[f];
    const auto value = final_values[f];
    const bool compressed = field.compression != Compression::none;
    if (!field.next_of) {
      if (!value.empty()) {
        return invalid(name(), "final observation: field '" + field.name +
                                   "' is not next_of, its value must be empty");
      }
      columns[f] = compressed ? value : std::span<const std::byte>(zeros).first(field.item_bytes());
    } else if (compressed) {
      if (auto status = check_zstd_frame(value, field.item_bytes()); !status) {
        return invalid(name(),
                       "final observation, field '" + field.name + "': " + status.error().message);
      }
      columns[f] = value;
      sizes[f] = static_cast<std::uint32_t>(value.size());
      cost += BlobColumn::cost(value.size());
    } else if (value.size() != field.item_bytes()) {
      return invalid(name(), "final observation, field '" + field.name +
                                 "': " + std::to_string(value.size()) + " bytes, the field holds " +
                                 std::to_string(field.item_bytes()));
    } else {
      columns[f] = value;
    }
    if (compressed) frame_sizes[f] = std::span(sizes).subspan(f, 1);
  }
  if (cost > items_.blob_budget_) {
    return invalid(name(), "final observation: its compressed values exceed max_compressed_bytes");
  }
  std::array<std::uint64_t, Schema::kMaxFields> offsets{};
  // The final observation carries the version of the episode's last stored step.
  const SlotQueue& slots = episodes_->find(episode)->slots;
  const std::uint64_t version =
      slots.empty() ? 0 : items_.storage_.version(slots[slots.size() - 1]);
  const std::uint32_t slot = items_.store_row(
      columns, 0, {}, frame_sizes, std::span(offsets).first(fields.size()), std::span(&version, 1));
  episodes_->append(episode, slot);
  step_log_->on_store(slot);
  windows_->on_append(slot);
  items_.rate_limiter_.record_inserts(1);
  items_.counters_.inserts += 1;
  return Ok{};
}

Status EpisodicTable::end_episode(std::uint64_t writer, std::uint64_t episode, EpisodeEnd how,
                                  std::span<const std::span<const std::byte>> final_values) {
  const Episode* found = episodes_->find(episode);
  if (found == nullptr || found->ended() || found->writer != writer) {
    return invalid(name(), "episode " + std::to_string(episode) + " is not open for this writer");
  }
  if (found->length == 0) {
    return invalid(name(), "episode " + std::to_string(episode) + " has no steps to end");
  }
  if (!final_values.empty()) {
    REPLAYD_RETURN_IF_ERROR(append_final_values(episode, final_values));
  }
  items_.replay_.on_episode_end(episodes_->find(episode)->length);
  const bool terminated = how == EpisodeEnd::terminated;
  episodes_->end(episode, terminated ? EpisodeState::terminated : EpisodeState::truncated);
  // An episode with no stored step left is forgotten by end(); no window can gain then.
  if (const Episode* ended = episodes_->find(episode)) {
    windows_->on_end(*ended);
    complete_->on_end(*ended);
  }
  return Ok{};
}

std::uint64_t EpisodicTable::end_writer(std::uint64_t writer) {
  std::uint64_t ended = 0;
  for (auto id : episodes_->open_episodes(writer)) {
    if (episodes_->find(id)->length == 0) {
      episodes_->discard_empty(id);
    } else {
      (void)end_episode(writer, id, EpisodeEnd::truncated);
      ++ended;
    }
  }
  return ended;
}

std::uint64_t EpisodicTable::end_all_writers() {
  std::uint64_t ended = 0;
  for (auto writer : episodes_->open_writers())
    ended += end_writer(writer);
  return ended;
}

Result<WindowIndex*> EpisodicTable::window_index(const WindowSpec& spec) {
  WindowIndex* index = windows_->get(spec);
  if (index == nullptr) {
    return make_error(ErrorCode::resource_exhausted,
                      "table '" + name() + "': more than " +
                          std::to_string(WindowIndexSet::kMaxIndexes) +
                          " distinct window requirements (n-step k, sequence length, stride, "
                          "burn_in, pad) are in use");
  }
  return index;
}

Result<WindowSpec> EpisodicTable::nstep_spec(const NStepRequest& request) const {
  if (request.k == 0 || request.k > items_.config_.capacity) {
    return invalid(name(), "nstep k must be between 1 and the capacity " +
                               std::to_string(items_.config_.capacity) + ", got " +
                               std::to_string(request.k));
  }
  if (!(request.gamma >= 0.0 && request.gamma <= 1.0)) {
    return invalid(name(), "gamma must be in [0, 1], got " + number_text(request.gamma));
  }
  REPLAYD_RETURN_IF_ERROR(check_beta(name(), request.beta));
  // next_of: the window reaches the step after its last (the next observation); stacks: the
  // frames before the start.
  const std::uint32_t forward = request.k + (items_.config_.schema.has_next_of() ? 1 : 0);
  return WindowSpec{forward, true, 1, items_.config_.schema.max_stack() - 1};
}

Result<WindowSpec> EpisodicTable::sequence_spec(const SequenceRequest& request) const {
  if (request.length == 0 ||
      std::uint64_t{request.length} + request.burn_in > items_.config_.capacity) {
    return invalid(name(), "sequence length " + std::to_string(request.length) + " + burn_in " +
                               std::to_string(request.burn_in) +
                               " must be between 1 and the capacity " +
                               std::to_string(items_.config_.capacity));
  }
  if (request.stride == 0) return invalid(name(), "sequence stride must be >= 1");
  REPLAYD_RETURN_IF_ERROR(check_beta(name(), request.beta));
  return WindowSpec{request.length, request.pad, request.stride,
                    request.burn_in + items_.config_.schema.max_stack() - 1};
}

Status EpisodicTable::admit_windows(std::uint64_t n, const WindowIndex& index) {
  if (n == 0) return invalid(name(), "sample of 0 items");
  if (auto status = items_.rate_limiter_.check_sample_batch(n); !status) {
    return invalid(name(), status.error().message);
  }
  const bool enough =
      items_.config_.max_times_sampled == 0 ? index.size() > 0 : index.draws_left() >= n;
  if (!enough || !items_.rate_limiter_.may_sample(n)) {
    return make_error(
        ErrorCode::would_block,
        "table '" + name() + "': sample held by rate limiter or too few valid starts");
  }
  return Ok{};
}

std::uint32_t EpisodicTable::record_draw(std::uint32_t slot) {
  const std::uint32_t times = items_.storage_.times_sampled(slot) + 1;
  items_.storage_.set_times_sampled(slot, times);
  if (items_.config_.max_times_sampled != 0) windows_->on_sampled(slot);
  if (items_.config_.max_times_sampled != 0 && times == items_.config_.max_times_sampled) {
    ++items_.counters_.expirations;  // retired as a start; the step stays as data
  }
  return times;
}

void EpisodicTable::observe_draws(std::span<const std::uint64_t> keys) {
  items_.observe_draws(keys);
  const std::uint64_t slot_mask = (std::uint64_t{1} << items_.storage_.slot_bits()) - 1;
  const std::uint64_t newest = episodes_->next_id() - 1;
  const std::size_t stride = Table::observed_stride(keys.size());  // the draws recorded
  for (std::size_t i = 0; i < keys.size(); i += stride) {
    const auto slot = static_cast<std::uint32_t>(keys[i] & slot_mask);
    items_.replay_.on_episode_draw(newest - episodes_->step(slot).episode);
  }
}

bool EpisodicTable::may_sample_nstep(std::uint64_t n, const NStepRequest& request) {
  auto spec = nstep_spec(request);
  if (!spec) return false;
  auto index = window_index(*spec);
  return index && admit_windows(n, **index).ok();
}

bool EpisodicTable::may_sample_sequences(std::uint64_t n, const SequenceRequest& request) {
  auto spec = sequence_spec(request);
  if (!spec) return false;
  auto index = window_index(*spec);
  return index && admit_windows(n, **index).ok();
}

Result<std::uint32_t> EpisodicTable::nstep_starts(const NStepRequest& request) {
  REPLAYD_ASSIGN_OR_RETURN(auto spec, nstep_spec(request));
  REPLAYD_ASSIGN_OR_RETURN(auto* index, window_index(spec));
  return index->size();
}

Result<std::uint32_t> EpisodicTable::sequence_starts(const SequenceRequest& request) {
  REPLAYD_ASSIGN_OR_RETURN(auto spec, sequence_spec(request));
  REPLAYD_ASSIGN_OR_RETURN(auto* index, window_index(spec));
  return index->size();
}

Result<WindowState> EpisodicTable::nstep_state(const NStepRequest& request) {
  REPLAYD_ASSIGN_OR_RETURN(auto spec, nstep_spec(request));
  REPLAYD_ASSIGN_OR_RETURN(auto* index, window_index(spec));
  return WindowState{index->size(), index->mass()};
}

Result<WindowState> EpisodicTable::sequence_state(const SequenceRequest& request) {
  REPLAYD_ASSIGN_OR_RETURN(auto spec, sequence_spec(request));
  REPLAYD_ASSIGN_OR_RETURN(auto* index, window_index(spec));
  return WindowState{index->size(), index->mass()};
}

Status EpisodicTable::sample_nstep(std::uint64_t n, const NStepRequest& request,
                                   const NStepBuffers& out) {
  REPLAYD_ASSIGN_OR_RETURN(auto spec, nstep_spec(request));
  const auto& fields = items_.config_.schema.fields();
  const SampleBuffers& base = out.base;
  const DType reward_dtype = fields[reward_field_].dtype;
  const std::uint64_t reward_bytes = fields[reward_field_].item_bytes();
  bool shapes_ok = base.keys.size() == n && base.probabilities.size() == n &&
                   base.weights.size() == n && base.times_sampled.size() == n &&
                   base.columns.size() == fields.size() && out.returns.size() == n * reward_bytes &&
                   out.bootstrap.size() == bootstrap_fields_.size() && out.discounts.size() == n &&
                   out.steps.size() == n &&
                   (out.frames.empty() ? !items_.config_.schema.has_frames()
                                       : out.frames.size() == fields.size());
  shapes_ok = shapes_ok && (base.rows.empty() || base.rows.size() == fields.size());
  for (std::size_t f = 0; shapes_ok && f < fields.size(); ++f) {
    const bool viewed = !base.rows.empty() && !fields[f].is_frame() && base.rows[f].size() == n;
    shapes_ok =
        base.columns[f].size() == (fields[f].is_frame() || viewed ? 0 : n * fields[f].item_bytes());
  }
  for (std::size_t b = 0; shapes_ok && b < bootstrap_fields_.size(); ++b)
    shapes_ok = out.bootstrap[b].size() == n * fields[bootstrap_fields_[b]].item_bytes();
  if (!shapes_ok) return invalid(name(), "n-step output buffers do not match n and the schema");
  bool viewed = false;
  for (std::size_t f = 0; f < fields.size(); ++f)
    viewed = viewed || (base.columns[f].empty() && !fields[f].is_frame());
  REPLAYD_RETURN_IF_ERROR(check_cold_list(base.cold != nullptr, viewed));
  REPLAYD_ASSIGN_OR_RETURN(WindowIndex * index, window_index(spec));
  REPLAYD_RETURN_IF_ERROR(admit_windows(n, *index));
  const bool next_of = items_.config_.schema.has_next_of();

  // Draws are picked a block ahead and their rows prefetched, so the cache misses of a
  // block overlap instead of following one another. Only when a draw cannot change the next
  // one's odds (max_times_sampled retires starts as they are drawn).
  const std::uint64_t block = items_.config_.max_times_sampled == 0 ? kPickAhead : 1;
  std::array<Pick, kPickAhead> picks;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t in_block = i % block;
    if (in_block == 0) {
      for (std::uint64_t j = 0; j < std::min(block, n - i); ++j) {
        picks[j] = index->sample(items_.rng_, request.beta);
        episodes_->prefetch_following(picks[j].slot);
        for (std::size_t f = 0; f < fields.size(); ++f) {
          if (!fields[f].is_frame()) __builtin_prefetch(items_.storage_.cell(f, picks[j].slot));
        }
      }
    }
    const Pick pick = picks[in_block];
    const std::uint32_t slot = pick.slot;
    // A step's reward is added once the walk moves past it: with next_of the last step
    // walked is the next observation, whose reward is not the window's.
    double total = 0.0;
    double scale = 1.0;
    double pending = 0.0;
    std::uint32_t last = slot;
    std::uint32_t before_last = slot;
    const NStepWindow walked =
        walk_nstep(*episodes_, slot, request.k + (next_of ? 1 : 0), [&](std::uint32_t step) {
          if (step != slot) {
            total += scale * pending;
            scale *= request.gamma;
          }
          pending = read_reward(items_.storage_.cell(reward_field_, step), reward_dtype);
          before_last = last;
          last = step;
        });
    NStepWindow window = walked;
    if (next_of) {
      window.steps = walked.steps - 1;  // the window index guarantees a next observation
      last = before_last;
    } else {
      total += scale * pending;
    }
    write_reward(out.returns.data() + i * reward_bytes, reward_dtype, total);
    // A cold bootstrap step: its record is read into this draw's bootstrap row, but for the
    // bootstrap fields that stay in RAM.
    const bool bootstrap_cold = items_.cold(last);
    bool bootstrap_listed = false;
    for (std::size_t b = 0; b < bootstrap_fields_.size(); ++b) {
      const auto field = static_cast<std::size_t>(bootstrap_fields_[b]);
      if (bootstrap_cold && items_.tier_field_bytes_[field] != 0) {
        if (!bootstrap_listed) {
          base.cold->push_back(ColdDraw{i, items_.tier_->location(last), ColdTarget::bootstrap});
          bootstrap_listed = true;
        }
        continue;
      }
      const std::uint64_t bytes = items_.storage_.item_bytes(field);
      copy_cell(out.bootstrap[b].data() + i * bytes, items_.storage_.cell(field, last), bytes);
    }
    items_.copy_or_list(slot, i, base.columns, base.rows, base.cold);
    if (!out.frames.empty()) {
      const StepRef ref = episodes_->step(slot);
      add_nstep_frames(*episodes_->find(ref.episode), ref.position, window.steps, out.frames);
    }
    out.discounts[i] = nstep_discount(window, request.gamma);
    out.steps[i] = window.steps;
    base.keys[i] = items_.storage_.key(slot);
    base.probabilities[i] = pick.probability;
    base.weights[i] = pick.weight;
    base.times_sampled[i] = record_draw(slot);
  }
  observe_draws(base.keys);
  items_.rate_limiter_.record_samples(n);
  items_.counters_.samples += n;
  return Ok{};
}

Status EpisodicTable::sample_sequences(std::uint64_t n, const SequenceRequest& request,
                                       const SequenceBuffers& out) {
  REPLAYD_ASSIGN_OR_RETURN(auto spec, sequence_spec(request));
  const auto& fields = items_.config_.schema.fields();
  const std::uint64_t steps = std::uint64_t{request.burn_in} + request.length;
  bool shapes_ok = out.keys.size() == n && out.probabilities.size() == n &&
                   out.weights.size() == n && out.times_sampled.size() == n &&
                   out.columns.size() == fields.size() && out.mask.size() == n * steps &&
                   (out.frames.empty() ? !items_.config_.schema.has_frames()
                                       : out.frames.size() == fields.size());
  for (std::size_t f = 0; shapes_ok && f < fields.size(); ++f) {
    shapes_ok =
        out.columns[f].size() == (fields[f].is_frame() ? 0 : n * steps * fields[f].item_bytes());
  }
  if (!shapes_ok) return invalid(name(), "sequence output buffers do not match n and the schema");
  REPLAYD_RETURN_IF_ERROR(check_cold_list(out.cold != nullptr, false));
  REPLAYD_ASSIGN_OR_RETURN(WindowIndex * index, window_index(spec));
  REPLAYD_RETURN_IF_ERROR(admit_windows(n, *index));

  const bool next_of = items_.config_.schema.has_next_of();
  for (std::uint64_t i = 0; i < n; ++i) {
    const Pick pick = index->sample(items_.rng_, request.beta);
    const std::uint32_t slot = pick.slot;
    const StepRef ref = episodes_->step(slot);
    const Episode& episode = *episodes_->find(ref.episode);
    for (std::uint64_t j = 0; j < steps; ++j) {
      // Position of row j: start - burn_in + j; before 0 or past the end is padding.
      const std::uint64_t shifted = std::uint64_t{ref.position} + j;
      const bool before = shifted < request.burn_in;
      const std::uint32_t row_slot =
          before ? EpisodeIndex::kNoSlot
                 : EpisodeIndex::slot_at(episode, shifted - request.burn_in);
      const std::uint64_t row = i * steps + j;
      const bool final_observation = next_of && episode.ended() &&
                                     row_slot != EpisodeIndex::kNoSlot &&
                                     shifted - request.burn_in + 1 == episode.length;
      out.mask[row] = row_slot != EpisodeIndex::kNoSlot && !final_observation ? 1 : 0;
      if (row_slot != EpisodeIndex::kNoSlot) {
        items_.copy_or_list(row_slot, row, out.columns, {}, out.cold);
        continue;
      }
      for (std::size_t f = 0; f < fields.size(); ++f) {
        if (fields[f].is_frame()) continue;
        const std::uint64_t bytes = items_.storage_.item_bytes(f);
        std::memset(out.columns[f].data() + row * bytes, 0, bytes);
      }
    }
    if (!out.frames.empty()) {
      add_sequence_frames(episode, std::int64_t{ref.position} - request.burn_in, steps, out.frames);
    }
    out.keys[i] = items_.storage_.key(slot);
    out.probabilities[i] = pick.probability;
    out.weights[i] = pick.weight;
    out.times_sampled[i] = record_draw(slot);
  }
  observe_draws(out.keys);
  items_.rate_limiter_.record_samples(n);
  items_.counters_.samples += n;
  return Ok{};
}

void EpisodicTable::add_nstep_frames(const Episode& episode, std::uint32_t position,
                                     std::uint32_t h,
                                     std::span<std::vector<std::uint32_t>> out) const {
  const auto& fields = items_.config_.schema.fields();
  for (std::size_t f = 0; f < fields.size(); ++f) {
    const Field& field = fields[f];
    if (!field.is_frame()) continue;
    const std::int64_t t = position;
    const std::int64_t s = field.stack;
    // Steps t-s+1 .. t, the first step standing in for those before the episode began;
    // then the next stack's steps that the first does not hold.
    for (std::int64_t p = t - s + 1; p <= t; ++p)
      out[f].push_back(
          EpisodeIndex::slot_at(episode, static_cast<std::uint64_t>(std::max<std::int64_t>(p, 0))));
    if (!field.next_of) continue;
    const FrameLayout layout = frame_layout(field.stack, true, h);
    const std::int64_t next = t + h;
    for (std::int64_t p = next - layout.next_offset + 1; p <= next; ++p)
      out[f].push_back(EpisodeIndex::slot_at(episode, static_cast<std::uint64_t>(p)));
  }
}

void EpisodicTable::add_sequence_frames(const Episode& episode, std::int64_t first,
                                        std::uint64_t steps,
                                        std::span<std::vector<std::uint32_t>> out) const {
  const auto& fields = items_.config_.schema.fields();
  for (std::size_t f = 0; f < fields.size(); ++f) {
    const Field& field = fields[f];
    if (!field.is_frame()) continue;
    const std::int64_t from = first - (std::int64_t{field.stack} - 1);
    const std::int64_t to = first + static_cast<std::int64_t>(steps);  // exclusive
    for (std::int64_t p = from; p < to; ++p) {
      if (p >= std::int64_t{episode.length}) {
        out[f].push_back(kNoFrame);
        continue;
      }
      const std::uint32_t slot =
          EpisodeIndex::slot_at(episode, static_cast<std::uint64_t>(std::max<std::int64_t>(p, 0)));
      out[f].push_back(slot == EpisodeIndex::kNoSlot ? kNoFrame : slot);
    }
  }
}

}  // namespace replayd
