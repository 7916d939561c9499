// The episodic part's whole-step reads of an episodic table: drawing and reading whole episodes
// (ragged: concatenated steps and offsets), and reading every stored step in insertion
// order, paginated by sequence number.
#include <cstring>

#include "core/storage/copy_cell.h"
#include "core/table/episodic_table.h"

namespace replayd {

Status EpisodicTable::check_step_buffers(const StepBuffers& out, std::uint64_t rows) const {
  const auto& fields = items_.config_.schema.fields();
  bool ok = out.keys.size() == rows && out.episodes.size() == rows &&
            out.positions.size() == rows && out.sequences.size() == rows &&
            out.columns.size() == fields.size() &&
            (out.slots.size() == rows || !items_.config_.schema.has_compression()) &&
            (out.ends.empty() || out.ends.size() == rows) &&
            (out.versions.empty() || out.versions.size() == rows);
  for (std::size_t f = 0; ok && f < fields.size(); ++f) {
    const bool compressed = fields[f].compression != Compression::none;
    ok = out.columns[f].size() == (compressed ? 0 : rows * fields[f].item_bytes());
  }
  if (ok) return Ok{};
  return make_error(ErrorCode::invalid_argument, "table '" + name() +
                                                     "': step output buffers do not hold " +
                                                     std::to_string(rows) + " rows of the schema");
}

Status EpisodicTable::check_cold_list(bool listed, bool viewed) const {
  if (items_.tier_ == nullptr || (listed && !viewed)) return Ok{};
  return make_error(ErrorCode::failed_precondition,
                    "table '" + name() +
                        "' has a file tier: its steps are copied into the reply (cold ones read "
                        "back from disk), never read in place or from shared memory; sample it "
                        "with rows copied (\"rows\": \"copy\")");
}

void EpisodicTable::copy_step(std::uint32_t slot, std::uint64_t row, const StepBuffers& out) const {
  const StepRef ref = episodes_->step(slot);
  out.keys[row] = items_.storage_.key(slot);
  out.episodes[row] = ref.episode;
  out.positions[row] = ref.position;
  out.sequences[row] = step_log_->sequence(slot);
  if (!out.slots.empty()) out.slots[row] = slot;
  if (!out.versions.empty()) out.versions[row] = items_.storage_.version(slot);
  if (!out.ends.empty()) {
    const std::uint32_t next = episodes_->following(slot);
    out.ends[row] = next == EpisodeIndex::kTerminatesHere  ? 1
                    : next == EpisodeIndex::kTruncatedHere ? 2
                                                           : 0;
  }
  items_.copy_or_list(slot, row, out.columns, {}, out.cold);
}

Status EpisodicTable::sample_episodes(std::uint64_t n, std::span<std::uint64_t> ids_out,
                                      std::span<double> probabilities_out) {
  if (n == 0 || ids_out.size() != n || probabilities_out.size() != n) {
    return make_error(ErrorCode::invalid_argument, "table '" + name() + "': episode sample of " +
                                                       std::to_string(n) +
                                                       " needs n >= 1 and outputs of n values");
  }
  if (auto status = items_.rate_limiter_.check_sample_batch(n); !status) {
    return make_error(ErrorCode::invalid_argument,
                      "table '" + name() + "': " + status.error().message);
  }
  if (complete_->size() == 0 || !items_.rate_limiter_.may_sample(n)) {
    return make_error(ErrorCode::would_block, "table '" + name() +
                                                  "': no complete episode stored, or the rate "
                                                  "limiter holds the sample");
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    const Pick pick = complete_->sample(items_.rng_);
    ids_out[i] = episodes_->step(pick.slot).episode;
    probabilities_out[i] = pick.probability;
  }
  items_.rate_limiter_.record_samples(n);
  items_.counters_.samples += n;
  return Ok{};
}

Result<std::uint64_t> EpisodicTable::episode_steps(std::span<const std::uint64_t> ids) const {
  std::uint64_t total = 0;
  for (auto id : ids) {
    const Episode* episode = episodes_->find(id);
    if (episode == nullptr) {
      return make_error(ErrorCode::not_found, "table '" + name() + "': episode " +
                                                  std::to_string(id) + " has no stored step");
    }
    total += episode->stored;
  }
  return total;
}

Status EpisodicTable::read_episodes(std::span<const std::uint64_t> ids, const StepBuffers& out,
                                    std::span<std::uint64_t> offsets) const {
  REPLAYD_ASSIGN_OR_RETURN(const std::uint64_t total, episode_steps(ids));
  REPLAYD_RETURN_IF_ERROR(check_step_buffers(out, total));
  REPLAYD_RETURN_IF_ERROR(check_cold_list(out.cold != nullptr, false));
  if (offsets.size() != ids.size() + 1) {
    return make_error(
        ErrorCode::invalid_argument,
        "table '" + name() + "': offsets must hold one value per episode and one more");
  }
  std::uint64_t row = 0;
  for (std::size_t e = 0; e < ids.size(); ++e) {
    offsets[e] = row;
    for (auto slot : episodes_->find(ids[e])->slots) {
      if (slot != EpisodeIndex::kNoSlot) copy_step(slot, row++, out);
    }
  }
  offsets[ids.size()] = row;
  return Ok{};
}

Result<std::uint64_t> EpisodicTable::read_steps(std::uint64_t after, const StepBuffers& out) const {
  const std::uint64_t max_n = out.keys.size();
  if (max_n == 0) {
    return make_error(ErrorCode::invalid_argument,
                      "table '" + name() + "': read of everything needs room for >= 1 step");
  }
  REPLAYD_RETURN_IF_ERROR(check_step_buffers(out, max_n));
  REPLAYD_RETURN_IF_ERROR(check_cold_list(out.cold != nullptr, false));
  std::uint64_t row = 0;
  step_log_->read(after, max_n,
                  [&](std::uint32_t slot, std::uint64_t) { copy_step(slot, row++, out); });
  return row;
}

}  // namespace replayd
