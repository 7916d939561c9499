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

// The table's resolved description, from info.
json::object description_of(Client& client, const std::string& table) {
  const json::object info = client.info(table);
  const json::value* tables = info.if_contains("tables");
  if (!tables || !tables->is_array() || tables->get_array().empty() ||
      !tables->get_array().front().is_object()) {
    throw Error(ErrorCode::bad_reply, "info of table '" + table + "' without the table");
  }
  const json::value* description =
      tables->get_array().front().get_object().if_contains("description");
  if (!description || !description->is_object()) {
    throw Error(ErrorCode::bad_reply, "info of table '" + table + "' without its description");
  }
  return description->get_object();
}

}  // namespace

EpisodeWriter::EpisodeWriter(std::string_view address, std::string table,
                             EpisodeWriterOptions options)
    : table_(std::move(table)), options_(std::move(options)) {
  if (options_.envs == 0) invalid("EpisodeWriter: envs must be >= 1, got 0");
  if (options_.batch == 0) invalid("EpisodeWriter: batch must be >= 1, got 0");
  if (options_.max_in_flight == 0) invalid("EpisodeWriter: max_in_flight must be >= 1, got 0");
  client_ = std::make_unique<Client>(address, options_.client);
  const json::object description = description_of(*client_, table_);
  const json::value* episodic = description.if_contains("episodic");
  if (!episodic || !episodic->is_bool() || !episodic->get_bool()) {
    invalid("table '" + table_ + "' is not episodic (create it with \"episodic\": true)");
  }
  const json::value* fields = description.if_contains("fields");
  if (!fields || !fields->is_array()) {
    throw Error(ErrorCode::bad_reply, "table '" + table_ + "': a description without fields");
  }
  for (const auto& value : fields->get_array()) {
    const json::object& spec = value.as_object();
    Field field;
    field.name = std::string(spec.at("name").as_string());
    const auto dtype = parse_dtype(spec.at("dtype").as_string());
    if (!dtype) throw Error(ErrorCode::bad_reply, "field '" + field.name + "' of unknown dtype");
    field.dtype = *dtype;
    std::uint64_t values = 1;
    for (const auto& dim : spec.at("shape").as_array()) {
      field.shape.push_back(dim.to_number<std::uint64_t>());
      values *= field.shape.back();
    }
    field.item_bytes = values * dtype_bytes(field.dtype);
    field.rows.resize(options_.batch * field.item_bytes);
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
  std::vector<const StepValue*> by_field(fields_.size(), nullptr);
  for (const StepValue& value : step) {
    std::size_t f = 0;
    while (f < fields_.size() && fields_[f].name != value.name)
      ++f;
    if (f == fields_.size()) {
      invalid("table '" + table_ + "' has no field '" + std::string(value.name) + "'");
    }
    const Field& field = fields_[f];
    if (by_field[f]) invalid("field '" + field.name + "' given twice in one step");
    if (value.dtype != field.dtype) {
      invalid("field '" + field.name + "': dtype " + std::string(dtype_name(value.dtype)) +
              " does not match the table's " + std::string(dtype_name(field.dtype)));
    }
    if (value.bytes.size() != field.item_bytes) {
      invalid("field '" + field.name + "': " + std::to_string(value.bytes.size()) +
              " bytes given, one step holds " + std::to_string(field.item_bytes));
    }
    by_field[f] = &value;
  }
  for (std::size_t f = 0; f < fields_.size(); ++f) {
    if (!by_field[f]) invalid("the step lacks field '" + fields_[f].name + "'");
  }
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

void EpisodeWriter::send_buffered() {
  if (rows_ == 0) return;
  request_.clear(rows_);
  for (const Field& field : fields_) {
    request_.add(field.name, field.dtype, field.shape,
                 std::span(field.rows).first(rows_ * field.item_bytes));
  }
  // The request is written before append_steps_async returns: the buffers are free again.
  Pending pending;
  pending.append =
      client_->append_steps_async(table_, request_, std::span(row_episodes_).first(rows_),
                                  {.timeout_ms = options_.timeout_ms}, ends_);
  rows_ = 0;
  ends_.clear();
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

void EpisodeWriter::end_episode(std::size_t env, bool terminated) {
  if (closed_)
    throw Error(ErrorCode::connection_lost, "EpisodeWriter of '" + table_ + "' is closed");
  check_env(env);
  if (!episodes_[env]) {
    invalid("table '" + table_ + "': env " + std::to_string(env) +
            " has no open episode (append a step first)");
  }
  if (rows_ > 0) {  // ended by the request of the buffered steps, right after them
    ends_.push_back({*episodes_[env], terminated});
    episodes_[env].reset();
    return;
  }
  Pending pending;
  pending.end = client_->end_episode_async(table_, *episodes_[env], terminated);
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
