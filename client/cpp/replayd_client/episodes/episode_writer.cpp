#include "replayd_client/episodes/episode_writer.h"

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
    field.rows.reserve(options_.batch * field.item_bytes);
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
  for (std::size_t f = 0; f < fields_.size(); ++f)
    buffer_value(fields_[f], *by_field[f], fields_[f].rows, fields_[f].frame_sizes);
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
    if (value.compressed && !field.zstd) {
      invalid("field '" + field.name + "' is not compressed; give its raw value");
    }
    if (value.dtype != field.dtype) {
      invalid("field '" + field.name + "': dtype " + std::string(dtype_name(value.dtype)) +
              " does not match the table's " + std::string(dtype_name(field.dtype)));
    }
    if (value.compressed) {
      if (!is_zstd_frame_of(value.bytes, field.item_bytes)) {
        invalid("field '" + field.name + "': the compressed value is not one zstd frame of " +
                std::to_string(field.item_bytes) + " bytes");
      }
    } else if (value.bytes.size() != field.item_bytes) {
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

void EpisodeWriter::buffer_value(const Field& field, const StepValue& value,
                                 std::vector<std::byte>& rows, std::vector<std::uint32_t>& sizes) {
  if (!field.zstd) {
    rows.insert(rows.end(), value.bytes.begin(), value.bytes.end());
  } else if (value.compressed) {
    rows.insert(rows.end(), value.bytes.begin(), value.bytes.end());
    sizes.push_back(static_cast<std::uint32_t>(value.bytes.size()));
  } else {
    sizes.push_back(compressor_.compress(value.bytes, field.level, rows));
  }
}

void EpisodeWriter::add_column(InsertBatch& batch, const Field& field,
                               std::span<const std::byte> rows,
                               std::span<const std::uint32_t> sizes, std::size_t count) {
  if (field.zstd) {
    batch.add_compressed(field.name, field.dtype, field.shape, sizes, rows);
  } else {
    batch.add(field.name, field.dtype, field.shape, rows.first(count * field.item_bytes));
  }
}

const InsertBatch* EpisodeWriter::final_batch() {
  if (ends_.empty() || !ends_have_finals_) return nullptr;
  final_request_.clear(ends_.size());
  for (const std::size_t f : next_of_) {
    const Field& field = fields_[f];
    add_column(final_request_, field, field.finals, field.final_sizes, ends_.size());
  }
  return &final_request_;
}

void EpisodeWriter::send_buffered() {
  if (rows_ == 0) return;
  request_.clear(rows_);
  for (const Field& field : fields_)
    add_column(request_, field, field.rows, field.frame_sizes, rows_);
  // The request is written before append_steps_async returns: the buffers are free again.
  Pending pending;
  pending.append =
      client_->append_steps_async(table_, request_, std::span(row_episodes_).first(rows_),
                                  {.timeout_ms = options_.timeout_ms}, ends_, final_batch());
  rows_ = 0;
  ends_.clear();
  ends_have_finals_ = false;
  for (Field& field : fields_) {
    field.rows.clear();
    field.frame_sizes.clear();
    field.finals.clear();
    field.final_sizes.clear();
  }
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
      buffer_value(fields_[f], *finals[f], fields_[f].finals, fields_[f].final_sizes);
    }
    episodes_[env].reset();
    return;
  }
  const InsertBatch* final_request = nullptr;
  if (has_final) {
    final_request_.clear(1);
    for (const std::size_t f : next_of_) {
      Field& field = fields_[f];
      field.finals.clear();
      field.final_sizes.clear();
      buffer_value(field, *finals[f], field.finals, field.final_sizes);
    }
    for (const std::size_t f : next_of_)  // once every buffer is filled: they no longer move
      add_column(final_request_, fields_[f], fields_[f].finals, fields_[f].final_sizes, 1);
    final_request = &final_request_;
  }
  Pending pending;
  pending.end = client_->end_episode_async(table_, *episodes_[env], terminated, final_request);
  for (const std::size_t f : next_of_) {  // sent: the buffers hold the next ends' values
    fields_[f].finals.clear();
    fields_[f].final_sizes.clear();
  }
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
