#include "replayd_client/episodes/episode_writer.h"

#include <algorithm>
#include <boost/json/array.hpp>
#include <chrono>
#include <cstring>
#include <utility>

namespace replayd::client {
namespace json = boost::json;
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::invalid_argument, message);
}

// The connection is gone or going: lost, or the server stopping (it answers what waits
// with shutting_down, then closes the connection).
bool is_lost(const Error& error) {
  return error.code() == ErrorCode::connection_lost || error.code() == ErrorCode::shutting_down;
}

}  // namespace

EpisodeWriter::EpisodeWriter(std::string_view address, std::string table,
                             EpisodeWriterOptions options)
    : address_(address), table_(std::move(table)), options_(std::move(options)) {
  if (options_.envs == 0) invalid("EpisodeWriter: envs must be >= 1, got 0");
  if (options_.batch == 0) invalid("EpisodeWriter: batch must be >= 1, got 0");
  if (options_.max_in_flight == 0) invalid("EpisodeWriter: max_in_flight must be >= 1, got 0");
  if (options_.max_delay && options_.max_delay->count() < 0) {
    invalid("EpisodeWriter: max_delay must be >= 0 ms or nullopt, got " +
            std::to_string(options_.max_delay->count()) + " ms");
  }
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
    field.zstd = described.compression == Compression::zstd;
    field.level = described.compression_level;
    if (described.next_of) next_of_.push_back(fields_.size());
    fields_.push_back(std::move(field));
  }
  row_episodes_.resize(options_.batch);
  episodes_.resize(options_.envs);
  stage_on_connection();
}

void EpisodeWriter::stage_on_connection() {
  slots_.reset();
  // The server takes frame fields through the socket only.
  const bool frames = std::any_of(descriptions_.begin(), descriptions_.end(),
                                  [](const FieldDescription& field) { return field.is_frame(); });
  if (!frames) {
    std::vector<std::size_t> item_bytes;
    for (const Field& field : fields_)
      item_bytes.push_back(field.item_bytes);
    slots_ = StepSlots::open(*client_, item_bytes, options_.batch, options_.max_in_flight + 1);
  }
  if (slots_) return;
  for (Field& field : fields_)  // the socket path buffers the steps in the writer's vectors
    field.rows.reserve(options_.batch * field.item_bytes);
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

Client& EpisodeWriter::client() {
  // A new connection is a new writer to the server: every env starts a new episode on it
  // (lost() forgot the old ones).
  if (!client_) {
    client_ = std::make_unique<Client>(address_, options_.client);
    try {
      stage_on_connection();
    } catch (...) {
      client_.reset();  // nothing was sent on it: the next call connects again
      throw;
    }
  }
  return *client_;
}

std::uint64_t EpisodeWriter::open_episode(std::size_t env) {
  if (!episodes_[env]) {
    if (spare_ids_.empty()) {
      const bool reconnects = !client_;  // nothing buffered or in flight to report then
      try {
        spare_ids_ = client().open_episodes(table_, options_.envs);
      } catch (const Error& e) {
        if (!is_lost(e)) throw;
        if (!reconnects) lost(e);
        slots_.reset();
        client_.reset();  // nothing was sent on it: the next append connects again
        throw;
      }
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
  if (slots_) {
    // The slot is free once the reply of the request that last named it arrived (with
    // max_in_flight + 1 slots it always has: this collects nothing).
    if (rows_ == 0) collect_through(slots_->busy_until());
    for (std::size_t f = 0; f < fields_.size(); ++f)
      std::memcpy(slots_->cell(f, rows_), by_field[f]->bytes.data(), fields_[f].item_bytes);
  } else {
    for (std::size_t f = 0; f < fields_.size(); ++f)
      buffer_value(fields_[f], *by_field[f], fields_[f].rows, fields_[f].frame_sizes);
  }
  row_episodes_[rows_++] = episode;
  if (rows_ == options_.batch) {
    send_buffered();
  } else if (rows_ == 1) {
    first_row_at_ = std::chrono::steady_clock::now();
  } else if (options_.max_delay &&
             std::chrono::steady_clock::now() - first_row_at_ > *options_.max_delay) {
    send_buffered();
  }
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
  for (std::size_t f = 0; f < fields_.size(); ++f) {
    const Field& field = fields_[f];
    if (slots_) {
      request_.add(field.name, field.dtype, field.shape, slots_->column(f, rows_));
    } else {
      add_column(request_, field, field.rows, field.frame_sizes, rows_);
    }
  }
  // The request is written before the call returns: the writer's own buffers are free
  // again; a staged request's slot is not, until its reply.
  Pending pending;
  const std::span<const std::uint64_t> row_episodes = std::span(row_episodes_).first(rows_);
  const InsertOptions options{.timeout_ms = options_.timeout_ms};
  try {
    if (slots_) {  // no final observations: only frame tables (never staged) have them
      std::copy(row_episodes.begin(), row_episodes.end(), slots_->episode_ids().begin());
      pending.append =
          client().append_steps_staged_async(table_, request_, slots_->staged(), options, ends_);
    } else {
      pending.append = client().append_steps_async(table_, request_, row_episodes, options, ends_,
                                                   final_batch());
    }
  } catch (const Error& e) {
    if (is_lost(e)) lost(e);  // the buffered steps and ends were not sent
    throw;
  }
  pending.carries = WriterRequest::of(row_episodes, ends_);
  if (slots_) slots_->advance(next_sequence_);  // the sequence push() gives this request
  clear_buffered();
  push(std::move(pending));
}

void EpisodeWriter::clear_buffered() {
  rows_ = 0;
  ends_.clear();
  ends_have_finals_ = false;
  for (Field& field : fields_) {
    field.rows.clear();
    field.frame_sizes.clear();
    field.finals.clear();
    field.final_sizes.clear();
  }
}

void EpisodeWriter::push(Pending pending) {
  pending.sequence = next_sequence_++;
  pending_.push_back(std::move(pending));
  while (pending_.size() > options_.max_in_flight)
    collect_front();
}

void EpisodeWriter::collect_front() {
  Pending& pending = pending_.front();
  try {
    if (pending.append.valid()) {
      const Keys keys = pending.append.get();
      if (options_.keep_keys) keys_.insert(keys_.end(), keys.begin(), keys.end());
    } else {
      pending.end.get();
    }
  } catch (const Error& e) {
    if (is_lost(e)) lost(e);  // this request and the later ones
    pending_.pop_front();
    throw;
  }
  pending_.pop_front();
}

void EpisodeWriter::account_for(Pending& pending, const Error& error, LostSteps& report) {
  const bool collected = !pending.append.valid() && !pending.end.valid();
  std::optional<ErrorCode> failure;
  if (collected) {  // the request whose error brought us here
    failure = error.code();
  } else {
    try {
      const bool ready =
          pending.append.valid()
              ? pending.append.wait_for(std::chrono::seconds(0)) == std::future_status::ready
              : pending.end.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
      if (!ready) {
        report.not_confirmed(pending.carries);
        return;
      }
      if (pending.append.valid()) {
        const Keys keys = pending.append.get();
        if (options_.keep_keys) keys_.insert(keys_.end(), keys.begin(), keys.end());
      } else {
        pending.end.get();
      }
      return;  // stored
    } catch (const Error& e) {
      failure = e.code();
    }
  }
  if (*failure == ErrorCode::connection_lost) {
    report.not_confirmed(pending.carries);
  } else {
    report.refused(pending.carries);  // an error reply: the request did nothing
  }
}

void EpisodeWriter::lost(const Error& error, std::span<const EpisodeEnding> unsent_end) {
  LostSteps report;
  report.not_sent(WriterRequest::of(std::span(row_episodes_).first(rows_), ends_));
  report.not_sent(WriterRequest::of({}, unsent_end));
  for (Pending& pending : pending_)
    account_for(pending, error, report);
  if (client_) client_->close();
  slots_.reset();  // the arena went with the connection
  client_.reset();
  pending_.clear();
  clear_buffered();
  for (auto& episode : episodes_)
    episode.reset();
  spare_ids_.clear();
  throw Error(ErrorCode::connection_lost, report.message(table_, error.message()));
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
  const EpisodeEnding end{*episodes_[env], terminated};
  try {
    pending.end = client().end_episode_async(table_, end.episode, terminated, final_request);
  } catch (const Error& e) {
    if (is_lost(e)) lost(e, std::span(&end, 1));
    throw;
  }
  pending.carries.ends.push_back(end);
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
    if (client_) client_->close();
    throw;
  }
  closed_ = true;
  if (client_) client_->close();
}

}  // namespace replayd::client
