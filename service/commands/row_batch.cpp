#include "service/commands/row_batch.h"

#include <algorithm>
#include <boost/json.hpp>

#include "core/storage/batch_layout.h"
#include "service/protocol/column_decoding.h"

namespace replayd::service::commands {
namespace json = boost::json;
namespace {

Error invalid(const std::string& message) {
  return make_error(ErrorCode::invalid_argument, message);
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
  auto status = writer_ ? table_->table->append_steps(*writer_, episodes_, rows_.values, n_,
                                                      priorities_, keys_out, rows_.frame_sizes)
                        : table_->table->insert(rows_.values, n_, priorities_, keys_out);
  if (!status) return make_error_reply(request_id_, status.error());
  for (std::size_t e = 0; e < ends_.size(); ++e) {
    const EpisodeEnding& end = ends_[e];
    const auto how = end.terminated ? EpisodeEnd::terminated : EpisodeEnd::truncated;
    std::vector<std::span<const std::byte>> final_values;
    if (!finals_.values.empty()) final_values = row_values(finals_, table_->table->schema(), e);
    if (auto ended = table_->table->end_episode(*writer_, end.episode, how, final_values); !ended) {
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
                                                           std::optional<std::uint64_t> writer,
                                                           std::uint64_t ends) {
  REPLAYD_ASSIGN_OR_RETURN(bool with_priorities, call.args.boolean_or("priorities", false));
  const json::value* columns = call.args.value("columns");
  const Table& table = *call.table->table;
  const Schema& schema = table.schema();
  if (!columns || !columns->is_array()) {
    return invalid("table '" + table.name() +
                   "': columns: expected an array describing every field");
  }
  const auto& list = columns->get_array();
  if (list.size() != schema.size()) return column_count_error(list, table);
  std::vector<std::size_t> every_field(schema.size());
  for (std::size_t f = 0; f < schema.size(); ++f)
    every_field[f] = f;
  std::vector<std::uint64_t> column_bytes;
  REPLAYD_ASSIGN_OR_RETURN(auto encodings,
                           decode_columns(list, every_field, table, call.n, column_bytes));
  if (writer) column_bytes.push_back(call.n * sizeof(std::uint64_t));
  if (with_priorities) column_bytes.push_back(call.n * sizeof(double));
  // The final observations of the episodes "end" lists (next_of fields only), one row each.
  std::vector<ColumnEncoding> final_encodings;
  if (const json::value* finals = call.args.value("final_columns"); finals && !finals->is_null()) {
    const auto fields = next_of_fields(schema);
    if (!writer || fields.empty() || ends == 0) {
      return call.args.error("final_columns",
                             "only an append to a table with next_of fields that ends episodes "
                             "(\"end\") carries final observations");
    }
    if (!finals->is_array() || finals->get_array().size() != fields.size()) {
      return call.args.error("final_columns",
                             "expected one column per next_of field, in the "
                             "table's order");
    }
    REPLAYD_ASSIGN_OR_RETURN(
        final_encodings, decode_columns(finals->get_array(), fields, table, ends, column_bytes));
  }
  REPLAYD_ASSIGN_OR_RETURN(ColumnLayout layout, layout_columns(column_bytes, 1));
  if (layout.total_bytes != call.frame.payload.size()) {
    return invalid("table '" + table.name() + "': payload holds " +
                   std::to_string(call.frame.payload.size()) + " bytes, the columns need " +
                   std::to_string(layout.total_bytes));
  }

  std::unique_ptr<RowBatchWork> work(
      new RowBatchWork(call.table, call.request_id, call.n, std::move(call.frame.payload), writer));
  const std::span<const std::byte> payload = work->payload_.span();
  std::size_t next = view_columns(payload, layout, 0, encodings, schema, call.n, work->rows_);
  if (writer) work->episodes_ = {work->payload_.as<std::uint64_t>(layout.offsets[next++]), call.n};
  if (with_priorities)
    work->priorities_ = {work->payload_.as<double>(layout.offsets[next++]), call.n};
  if (!final_encodings.empty())
    view_columns(payload, layout, next, final_encodings, schema, ends, work->finals_);
  return work;
}

}  // namespace replayd::service::commands
