#include "replayd_client/episode_writer.h"

#include <algorithm>
#include <boost/json/array.hpp>
#include <cstring>
#include <utility>

namespace replayd::client {
namespace json = boost::json;
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::invalid_argument, message);
}

}  // namespace

EpisodeWriter::EpisodeWriter(std::string_view address, std::string table,
                             EpisodeWriterOptions options)
    : table_(std::move(table)), options_(std::move(options)) {
  if (options_.envs == 0) invalid("EpisodeWriter: envs must be >= 1, got 0");
  if (options_.batch == 0) invalid("EpisodeWriter: batch must be >= 1, got 0");
  if (options_.max_in_flight == 0) invalid("EpisodeWriter: max_in_flight must be >= 1, got 0");
  client_ = std::make_unique<Client>(address, options_.client);
  const json::object description = table_description(*client_, table_);
  const json::value* episodic = description.if_contains("episodic");
  if (!episodic || !episodic->is_bool() || !episodic->get_bool()) {
    invalid("table '" + table_ + "' is not episodic (create it with \"episodic\": true)");
  }
  descriptions_ = fields_of(description, table_);
  for (const FieldDescription& described : descriptions_) {
    Field field;
    field.name = described.name;
    field.dtype = described.dtype;
    field.shape = described.shape;
    field.item_bytes = described.item_bytes;
    field.rows.resize(options_.batch * field.item_bytes);
    field.zstd = described.compression == Compression::zstd;
    field.level = described.compression_level;
    if (described.next_of) next_of_.push_back(fields_.size());
    fields_.push_back(std::move(field));
  }
  row_episodes_.resize(options_.batch);
  episodes_.resize(options_.envs);
}

EpisodeWriter::~EpisodeWriter() {
  try {
    close();
  } catch (...) {  // NOLINT(bugprone-empty-catch): close() documents how to see them
  }
}

std::size_t EpisodeWriter::check_env(std::size_t env) const {
  if (env >= options_.envs) {
    invalid("table '" + table_ + "': env must be in 0.." + std::to_string(options_.envs - 1) +
            ", got " + std::to_string(env));
  }
  return env;
}

std::optional<std::uint64_t> EpisodeWriter::episode(std::size_t env) const {
  return episodes_.at(check_env(env));
}

std::uint64_t EpisodeWriter::open_episode(std::size_t env) {
  if (!episodes_[env]) {
    if (spare_ids_.empty()) {
      spare_ids_ = client_->open_episodes(table_, options_.envs);
      std::reverse(spare_ids_.begin(), spare_ids_.end());  // hand them out in id order
    }
    episodes_[env] = spare_ids_.back();
    spare_ids_.pop_back();
  }
  return *episodes_[env];
}

void EpisodeWriter::append(std::size_t env, std::span<const StepValue> step) {
  if (closed_)
    throw Error(ErrorCode::connection_lost, "EpisodeWriter of '" + table_ + "' is closed");
  check_env(env);
  // Check every value before copying any, so that a bad step buffers nothing.
  const std::vector<const StepValue*> by_field = match_values(step, /*finals_only=*/false);
  const std::uint64_t episode = open_episode(env);
  for (std::size_t f = 0; f < fields_.size(); ++f) {
    Field& field = fields_[f];
    if (field.item_bytes != 0) {
      std::memcpy(field.rows.data() + rows_ * field.item_bytes, by_field[f]->bytes.data(),
                  field.item_bytes);
    }
  }
  row_episodes_[rows_++] = episode;
  if (rows_ == options_.batch) send_buffered();
}

std::vector<const StepValue*> EpisodeWriter::match_values(std::span<const StepValue> values,
                                                          bool finals_only) const {
  std::vector<bool> wanted(fields_.size(), !finals_only);
  for (const std::size_t f : next_of_)
    wanted[f] = true;
  std::vector<const StepValue*> by_field(fields_.size(), nullptr);
  const std::string what = finals_only ? "final observation" : "step";
  for (const StepValue& value : values) {
    std::size_t f = 0;
    while (f < fields_.size() && fields_[f].name != value.name)
      ++f;
    if (f == fields_.size()) {
      invalid("table '" + table_ + "' has no field '" + std::string(value.name) + "'");
    }
    const Field& field = fields_[f];
    if (!wanted[f]) {
      invalid("table '" + table_ + "': field '" + field.name +
              "' is not next_of; a final observation holds the next_of fields only");
    }
    if (by_field[f]) invalid("field '" + field.name + "' given twice in one " + what);
    if (value.dtype != field.dtype) {
      invalid("field '" + field.name + "': dtype " + std::string(dtype_name(value.dtype)) +
              " does not match the table's " + std::string(dtype_name(field.dtype)));
    }
    if (value.bytes.size() != field.item_bytes) {
      invalid("field '" + field.name + "': " + std::to_string(value.bytes.size()) +
              " bytes given, one value holds " + std::to_string(field.item_bytes));
    }
    by_field[f] = &value;
  }
  for (std::size_t f = 0; f < fields_.size(); ++f) {
    if (wanted[f] && !by_field[f])
      invalid("the " + what + " lacks field '" + fields_[f].name + "'");
  }
  return by_field;
}

void EpisodeWriter::add_column(InsertBatch& batch, const Field& field,
                               std::span<const std::byte> data, std::size_t rows,
                               std::vector<std::uint32_t>& sizes, std::vector<std::byte>& frames) {
  if (!field.zstd) {
    batch.add(field.name, field.dtype, field.shape, data.first(rows * field.item_bytes));
    return;
  }
  sizes.clear();
  frames.clear();
  for (std::size_t r = 0; r < rows; ++r) {
    sizes.push_back(compressor_.compress(data.subspan(r * field.item_bytes, field.item_bytes),
                                         field.level, frames));
  }
  // Every frame is made before the batch borrows the buffers: they no longer move.
  batch.add_compressed(field.name, field.dtype, field.shape, sizes, frames);
}

const InsertBatch* EpisodeWriter::final_batch() {
  if (ends_.empty() || !ends_have_finals_) return nullptr;
  final_request_.clear(ends_.size());
  for (const std::size_t f : next_of_) {
    Field& field = fields_[f];
    add_column(final_request_, field, field.finals, ends_.size(), field.final_sizes,
               field.final_frames);
  }
  return &final_request_;
}

void EpisodeWriter::send_buffered() {
  if (rows_ == 0) return;
  request_.clear(rows_);
  for (Field& field : fields_)
    add_column(request_, field, field.rows, rows_, field.frame_sizes, field.frames);
  // The request is written before append_steps_async returns: the buffers are free again.
  Pending pending;
  pending.append =
      client_->append_steps_async(table_, request_, std::span(row_episodes_).first(rows_),
                                  {.timeout_ms = options_.timeout_ms}, ends_, final_batch());
  rows_ = 0;
  ends_.clear();
  ends_have_finals_ = false;
  for (const std::size_t f : next_of_)
    fields_[f].finals.clear();
  push(std::move(pending));
}

void EpisodeWriter::push(Pending pending) {
  pending.sequence = next_sequence_++;
  pending_.push_back(std::move(pending));
  while (pending_.size() > options_.max_in_flight)
    collect_front();
}

void EpisodeWriter::collect_front() {
  Pending pending = std::move(pending_.front());
  pending_.pop_front();
  if (pending.append.valid()) {
    const Keys keys = pending.append.get();
    if (options_.keep_keys) keys_.insert(keys_.end(), keys.begin(), keys.end());
  } else {
    pending.end.get();
  }
}

void EpisodeWriter::collect_through(std::uint64_t sequence) {
  while (!pending_.empty() && pending_.front().sequence <= sequence)
    collect_front();
}

void EpisodeWriter::end_episode(std::size_t env, bool terminated,
                                std::span<const StepValue> final_observation) {
  if (closed_)
    throw Error(ErrorCode::connection_lost, "EpisodeWriter of '" + table_ + "' is closed");
  check_env(env);
  if (!episodes_[env]) {
    invalid("table '" + table_ + "': env " + std::to_string(env) +
            " has no open episode (append a step first)");
  }
  const bool has_final = !final_observation.empty();
  std::vector<const StepValue*> finals;
  if (has_final) finals = match_values(final_observation, /*finals_only=*/true);
  // One request carries final observations for all its ends or for none.
  if (rows_ > 0 && !ends_.empty() && ends_have_finals_ != has_final) send_buffered();
  if (rows_ > 0) {  // ended by the request of the buffered steps, right after them
    ends_.push_back({*episodes_[env], terminated});
    ends_have_finals_ = has_final;
    for (const std::size_t f : next_of_) {
      if (!has_final) break;
      const auto bytes = finals[f]->bytes;
      fields_[f].finals.insert(fields_[f].finals.end(), bytes.begin(), bytes.end());
    }
    episodes_[env].reset();
    return;
  }
  const InsertBatch* final_request = nullptr;
  if (has_final) {
    final_request_.clear(1);
    for (const std::size_t f : next_of_) {
      Field& field = fields_[f];
      add_column(final_request_, field, finals[f]->bytes, 1, field.final_sizes, field.final_frames);
    }
    final_request = &final_request_;
  }
  Pending pending;
  pending.end = client_->end_episode_async(table_, *episodes_[env], terminated, final_request);
  episodes_[env].reset();
  push(std::move(pending));
}

void EpisodeWriter::flush() {
  if (closed_) return;
  send_buffered();
  collect_through(next_sequence_ - 1);
}

void EpisodeWriter::close() {
  if (closed_) return;
  try {
    flush();
    for (std::size_t env = 0; env < options_.envs; ++env) {
      if (episodes_[env]) end_episode(env, /*terminated=*/false);
    }
    flush();
  } catch (...) {
    closed_ = true;
    pending_.clear();
    client_->close();
    throw;
  }
  closed_ = true;
  client_->close();
}

}  // namespace replayd::client
