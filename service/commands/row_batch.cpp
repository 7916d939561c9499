#include "service/commands/row_batch.h"

#include <algorithm>
#include <boost/json.hpp>

#include "core/batch_layout.h"

namespace replayd::service::commands {
namespace json = boost::json;
namespace {

Error invalid(const std::string& message) {
  return make_error(ErrorCode::invalid_argument, message);
}

// Checks one entry of "columns" against field `index` of the schema.
Status check_column(const json::value& column, std::size_t index, const Field& field,
                    std::uint64_t n, const std::string& table) {
  const std::string where = "table '" + table + "': columns[" + std::to_string(index) + "]";
  if (!column.is_object()) return invalid(where + ": expected an object");
  JsonReader reader(column.get_object(), "columns[" + std::to_string(index) + "]");
  REPLAYD_ASSIGN_OR_RETURN(std::string name, reader.string("name"));
  if (name != field.name) {
    return invalid(where + ": column '" + name + "' where the table's field " +
                   std::to_string(index) + " is '" + field.name +
                   "' (send every field, in the table's order)");
  }
  const std::string who = "table '" + table + "': field '" + field.name + "'";
  REPLAYD_ASSIGN_OR_RETURN(std::string dtype, reader.string("dtype"));
  if (dtype != dtype_name(field.dtype)) {
    return invalid(who + ": dtype " + dtype + " does not match the table's " +
                   std::string(dtype_name(field.dtype)));
  }
  const json::value* shape = reader.value("shape");
  json::array expected{n};
  for (auto dim : field.shape)
    expected.push_back(dim);
  const std::string expected_text = json::serialize(expected);
  if (!shape || !shape->is_array() || shape->get_array().size() != expected.size()) {
    return invalid(who + ": shape must be " + expected_text + " ([n] + the field's shape)");
  }
  for (std::size_t d = 0; d < expected.size(); ++d) {
    const auto dim = as_uint(shape->get_array()[d]);
    if (!dim || *dim != expected[d].as_uint64()) {
      return invalid(who + ": shape " + json::serialize(*shape) + " does not match " +
                     expected_text + " ([n] + the field's shape)");
    }
  }
  return reader.finish();
}

// Names the fields that are missing from, or unknown to, a column list of the wrong length.
Error column_count_error(const json::array& list, const Table& table) {
  std::vector<std::string_view> listed;
  for (const auto& column : list) {
    const auto* object = column.if_object();
    const auto* name = object ? object->if_contains("name") : nullptr;
    if (name && name->is_string()) listed.push_back(name->get_string());
  }
  std::string missing, unknown;
  for (const auto& field : table.schema().fields()) {
    if (std::find(listed.begin(), listed.end(), field.name) == listed.end()) {
      missing += (missing.empty() ? "'" : ", '") + field.name + "'";
    }
  }
  for (auto name : listed) {
    if (table.schema().find(name) < 0)
      unknown += (unknown.empty() ? "'" : ", '") + std::string(name) + "'";
  }
  std::string message = "table '" + table.name() + "': columns lists " +
                        std::to_string(list.size()) + " fields, the table has " +
                        std::to_string(table.schema().fields().size());
  if (!missing.empty()) message += "; missing field " + missing;
  if (!unknown.empty()) message += "; unknown field " + unknown;
  return invalid(message);
}

}  // namespace

std::string RowBatchWork::why_not_ready() const {
  return std::string("the rate limiter does not admit this ") + (writer_ ? "append" : "insert") +
         " now";
}

Reply RowBatchWork::run() {
  ByteBuffer keys(n_ * sizeof(std::uint64_t));
  std::span<std::uint64_t> keys_out{keys.as<std::uint64_t>(0), n_};
  auto status = writer_ ? table_->table->append_steps(*writer_, episodes_, columns_, n_,
                                                      priorities_, keys_out)
                        : table_->table->insert(columns_, n_, priorities_, keys_out);
  if (!status) return make_error_reply(request_id_, status.error());
  for (const auto& end : ends_) {
    const auto how = end.terminated ? EpisodeEnd::terminated : EpisodeEnd::truncated;
    if (auto ended = table_->table->end_episode(*writer_, end.episode, how); !ended) {
      table_changed(*table_);
      return make_error_reply(
          request_id_,
          make_error(ended.error().code, "the " + std::to_string(n_) +
                                             " steps were stored, but ending an episode failed: " +
                                             ended.error().message));
    }
  }
  table_changed(*table_);
  return make_reply(request_id_, "{\"n\":" + std::to_string(n_) + "}", std::move(keys));
}

Result<std::unique_ptr<RowBatchWork>> RowBatchWork::decode(Call& call,
                                                           std::optional<std::uint64_t> writer) {
  REPLAYD_ASSIGN_OR_RETURN(bool with_priorities, call.args.boolean_or("priorities", false));
  const json::value* columns = call.args.value("columns");
  const Table& table = *call.table->table;
  const auto& fields = table.schema().fields();
  if (!columns || !columns->is_array()) {
    return invalid("table '" + table.name() +
                   "': columns: expected an array describing every field");
  }
  const auto& list = columns->get_array();
  if (list.size() != fields.size()) return column_count_error(list, table);
  std::vector<std::uint64_t> bytes_per_item;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    REPLAYD_RETURN_IF_ERROR(check_column(list[i], i, fields[i], call.n, table.name()));
    bytes_per_item.push_back(fields[i].item_bytes());
  }
  if (writer) bytes_per_item.push_back(sizeof(std::uint64_t));
  if (with_priorities) bytes_per_item.push_back(sizeof(double));
  REPLAYD_ASSIGN_OR_RETURN(ColumnLayout layout, layout_columns(bytes_per_item, call.n));
  if (layout.total_bytes != call.frame.payload.size()) {
    return invalid("table '" + table.name() + "': payload holds " +
                   std::to_string(call.frame.payload.size()) + " bytes, the columns need " +
                   std::to_string(layout.total_bytes));
  }

  std::unique_ptr<RowBatchWork> work(
      new RowBatchWork(call.table, call.request_id, call.n, std::move(call.frame.payload), writer));
  std::byte* data = work->payload_.data();
  for (std::size_t i = 0; i < fields.size(); ++i)
    work->columns_.emplace_back(data + layout.offsets[i], call.n * bytes_per_item[i]);
  std::size_t next = fields.size();
  if (writer) work->episodes_ = {work->payload_.as<std::uint64_t>(layout.offsets[next++]), call.n};
  if (with_priorities)
    work->priorities_ = {work->payload_.as<double>(layout.offsets[next]), call.n};
  return work;
}

}  // namespace replayd::service::commands
