// The Client's operations on episodic tables (docs/PROTOCOL.md, "Episodic tables").
#include <cmath>
#include <span>
#include <vector>

#include "replayd_client/client.h"
#include "replayd_client/episodes/episode_decoders.h"
#include "replayd_client/wire/request_meta.h"

namespace replayd::client {
namespace {

// Adds `"end": [...]` to the closed request object `meta` (nothing when `ends` is empty).
void append_ends(std::string& meta, std::span<const EpisodeEnding> ends) {
  if (ends.empty()) return;
  meta.pop_back();  // the object's closing brace
  meta.append(",\"end\":[");
  for (std::size_t i = 0; i < ends.size(); ++i) {
    meta.append(i == 0 ? "{\"episode\":" : ",{\"episode\":");
    append_json_uint(meta, ends[i].episode);
    meta.append(ends[i].terminated ? ",\"terminated\":true}" : ",\"terminated\":false}");
  }
  meta.append("]}");
}

}  // namespace

std::future<SampleBatch> Client::sample_nstep_async(std::string_view table, std::uint64_t n,
                                                    NStepOptions options) {
  if (!std::isfinite(options.beta)) {
    throw Error(ErrorCode::invalid_argument, "sample_nstep: beta must be finite and >= 0");
  }
  if (!std::isfinite(options.gamma)) {
    throw Error(ErrorCode::invalid_argument, "sample_nstep: gamma must be in [0, 1]");
  }
  std::string& meta = table_request("sample", table);
  meta.append(",\"n\":");
  append_json_uint(meta, n);
  meta.append(",\"nstep\":");
  append_json_uint(meta, options.nstep);
  meta.append(",\"gamma\":");
  append_json_double(meta, options.gamma);
  meta.append(",\"beta\":");
  append_json_double(meta, options.beta);
  meta.append(",\"timeout_ms\":");
  append_json_optional_uint(meta, options.timeout_ms);
  if (options.raw) meta.append(",\"raw\":true");
  meta.push_back('}');
  return connection_->call<SampleBatch, decode_sample>(meta, {});
}

std::future<std::vector<std::uint64_t>> Client::open_episodes_async(std::string_view table,
                                                                    std::uint64_t n) {
  std::string& meta = table_request("open_episodes", table);
  meta.append(",\"n\":");
  append_json_uint(meta, n);
  meta.push_back('}');
  return connection_->call<std::vector<std::uint64_t>, decode_episode_ids>(meta, {});
}

std::future<Keys> Client::append_steps_async(std::string_view table, const InsertBatch& batch,
                                             std::span<const std::uint64_t> episode_ids,
                                             InsertOptions options,
                                             std::span<const EpisodeEnding> ends,
                                             const InsertBatch* final_columns) {
  if (episode_ids.size() != batch.size()) {
    throw Error(ErrorCode::invalid_argument,
                "append_steps: " + std::to_string(batch.size()) + " steps but " +
                    std::to_string(episode_ids.size()) + " episode ids");
  }
  if (final_columns && final_columns->size() != ends.size()) {
    throw Error(ErrorCode::invalid_argument,
                "append_steps: " + std::to_string(final_columns->size()) +
                    " final observations for " + std::to_string(ends.size()) + " ends");
  }
  std::string& meta = scratch_meta();
  batch.append_meta(meta, table, options.timeout_ms, "append_steps");
  append_ends(meta, ends);
  if (final_columns) {
    meta.pop_back();
    meta.append(",\"final_columns\":");
    final_columns->append_columns_json(meta);
    meta.push_back('}');
  }
  // The fields, the episode ids (8-byte values: no padding), the priorities, then the
  // final observations.
  thread_local std::vector<PayloadPiece> payload;
  payload.clear();
  const auto fields = batch.field_payload();
  const auto priorities = batch.priority_payload();
  payload.insert(payload.end(), fields.begin(), fields.end());
  payload.push_back(std::as_bytes(episode_ids));
  payload.insert(payload.end(), priorities.begin(), priorities.end());
  if (final_columns) {
    const auto finals = final_columns->field_payload();
    payload.insert(payload.end(), finals.begin(), finals.end());
  }
  return connection_->call<Keys, decode_keys>(meta, payload);
}

std::future<Keys> Client::append_steps_staged_async(std::string_view table,
                                                    const InsertBatch& batch,
                                                    const StagedInsert& staged,
                                                    InsertOptions options,
                                                    std::span<const EpisodeEnding> ends) {
  if (staged.arena == nullptr) {
    throw Error(ErrorCode::invalid_argument, "append_steps_staged: no staging arena");
  }
  std::string& meta = scratch_meta();
  batch.append_meta(meta, table, options.timeout_ms, "append_steps");
  append_ends(meta, ends);
  meta.pop_back();  // the closing brace: the staged member goes in
  append_staged_member(meta, staged.arena->id(), staged.offset,
                       staged.rows == 0 ? batch.size() : staged.rows);
  meta.push_back('}');
  return connection_->call<Keys, decode_keys>(meta, {});
}

std::future<std::uint64_t> Client::end_episode_async(std::string_view table, std::uint64_t episode,
                                                     bool terminated,
                                                     const InsertBatch* final_observation) {
  std::string& meta = table_request("end_episode", table);
  meta.append(",\"episode\":");
  append_json_uint(meta, episode);
  meta.append(terminated ? ",\"terminated\":true" : ",\"terminated\":false");
  if (!final_observation) {
    meta.push_back('}');
    return connection_->call<std::uint64_t, decode_ended_episode>(meta, {});
  }
  if (final_observation->size() != 1) {
    throw Error(ErrorCode::invalid_argument, "end_episode: a final observation has one row, not " +
                                                 std::to_string(final_observation->size()));
  }
  meta.append(",\"columns\":");
  final_observation->append_columns_json(meta);
  meta.push_back('}');
  return connection_->call<std::uint64_t, decode_ended_episode>(meta,
                                                                final_observation->field_payload());
}

std::future<SequenceBatch> Client::sample_sequences_async(std::string_view table, std::uint64_t n,
                                                          std::uint64_t length,
                                                          SequenceOptions options) {
  if (!std::isfinite(options.beta)) {
    throw Error(ErrorCode::invalid_argument, "sample_sequences: beta must be finite and >= 0");
  }
  std::string& meta = table_request("sample_sequences", table);
  meta.append(",\"n\":");
  append_json_uint(meta, n);
  meta.append(",\"length\":");
  append_json_uint(meta, length);
  meta.append(",\"stride\":");
  append_json_uint(meta, options.stride);
  meta.append(",\"burn_in\":");
  append_json_uint(meta, options.burn_in);
  meta.append(options.pad ? ",\"pad\":true" : ",\"pad\":false");
  meta.append(",\"beta\":");
  append_json_double(meta, options.beta);
  meta.append(",\"timeout_ms\":");
  append_json_optional_uint(meta, options.timeout_ms);
  if (options.raw) meta.append(",\"raw\":true");
  meta.push_back('}');
  return connection_->call<SequenceBatch, decode_sequences>(meta, {});
}

std::future<StepPage> Client::read_steps_async(std::string_view table, std::uint64_t n,
                                               std::uint64_t after) {
  std::string& meta = table_request("read_steps", table);
  meta.append(",\"n\":");
  append_json_uint(meta, n);
  meta.append(",\"after\":");
  append_json_uint(meta, after);
  meta.push_back('}');
  return connection_->call<StepPage, decode_step_page>(meta, {});
}

}  // namespace replayd::client
