#include "service/protocol/row_batch.h"

#include <algorithm>
#include <boost/json.hpp>

#include "service/protocol/batch_layout.h"
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

Result<RowBatch> decode_row_batch(JsonReader& args, const Table& table, std::uint64_t n,
                                  ByteBuffer& payload, bool with_episodes, std::uint64_t ends) {
  REPLAYD_ASSIGN_OR_RETURN(bool with_priorities, args.boolean_or("priorities", false));
  const json::value* columns = args.value("columns");
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
                           decode_columns(list, every_field, table, n, column_bytes));
  if (with_episodes) column_bytes.push_back(n * sizeof(std::uint64_t));
  if (with_priorities) column_bytes.push_back(n * sizeof(double));
  // The final observations of the episodes "end" lists (next_of fields only), one row each.
  std::vector<ColumnEncoding> final_encodings;
  if (const json::value* finals = args.value("final_columns"); finals && !finals->is_null()) {
    const auto fields = next_of_fields(schema);
    if (!with_episodes || fields.empty() || ends == 0) {
      return args.error("final_columns",
                        "only an append to a table with next_of fields that ends episodes "
                        "(\"end\") carries final observations");
    }
    if (!finals->is_array() || finals->get_array().size() != fields.size()) {
      return args.error("final_columns",
                        "expected one column per next_of field, in the "
                        "table's order");
    }
    REPLAYD_ASSIGN_OR_RETURN(
        final_encodings, decode_columns(finals->get_array(), fields, table, ends, column_bytes));
  }
  REPLAYD_ASSIGN_OR_RETURN(ColumnLayout layout, layout_columns(column_bytes, 1));
  if (layout.total_bytes != payload.size()) {
    return invalid("table '" + table.name() + "': payload holds " + std::to_string(payload.size()) +
                   " bytes, the columns need " + std::to_string(layout.total_bytes));
  }

  RowBatch batch;
  batch.payload = std::move(payload);
  batch.n = n;
  const std::span<const std::byte> bytes = batch.payload.span();
  std::size_t next = view_columns(bytes, layout, 0, encodings, schema, n, batch.rows);
  if (with_episodes) batch.episodes = {batch.payload.as<std::uint64_t>(layout.offsets[next++]), n};
  if (with_priorities) batch.priorities = {batch.payload.as<double>(layout.offsets[next++]), n};
  if (!final_encodings.empty())
    view_columns(bytes, layout, next, final_encodings, schema, ends, batch.finals);
  return batch;
}

}  // namespace replayd::service::commands
