#include "service/protocol/row_batch.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cstring>

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

// Where a staged batch lies: its arena's bytes from `offset`, laid out for `rows` rows.
struct StagedPlace {
  StagedBytes arena;
  std::uint64_t offset = 0;
  std::uint64_t rows = 0;
};

Result<StagedPlace> read_staged(JsonReader& args, const boost::json::value& value,
                                const Table& table, std::uint64_t n, const StagingLookup* staging) {
  REPLAYD_ASSIGN_OR_RETURN(JsonReader staged, JsonReader::of(value, args.path_of("staged")));
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t arena, staged.uint("arena"));
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t offset, staged.uint("offset"));
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t rows, staged.uint_or("rows", n));
  REPLAYD_RETURN_IF_ERROR(staged.finish());
  if (table.schema().has_frames()) {
    return args.error("staged", "table '" + table.name() +
                                    "' has frame fields (stacked, next_of or compressed): "
                                    "its rows travel in the frame");
  }
  if (offset % 8 != 0) return staged.error("offset", "must be a multiple of 8");
  if (rows < n || rows > UINT32_MAX) {
    return staged.error("rows", "must be between n (" + std::to_string(n) + ") and 2^32 - 1");
  }
  if (staging == nullptr) {
    return make_error(ErrorCode::permission_denied,
                      "a staged payload needs the shared-memory data plane, which this "
                      "connection does not have");
  }
  REPLAYD_ASSIGN_OR_RETURN(StagedBytes bytes, staging->staged_bytes(arena));
  return StagedPlace{std::move(bytes), offset, rows};
}

// Views a staged batch: its columns laid out for place.rows rows, the first n of each. The
// episode ids and priorities are copied into the batch's own bytes first: the server checks
// them and then uses them, and the client can write the arena at any time.
Result<RowBatch> view_staged(StagedPlace place, std::vector<std::uint64_t> column_bytes,
                             std::span<const ColumnEncoding> encodings, const Table& table,
                             std::uint64_t n, bool with_episodes, bool with_priorities,
                             bool with_versions) {
  for (auto& bytes : column_bytes)
    bytes = bytes / n * place.rows;  // every column is n fixed-size values
  REPLAYD_ASSIGN_OR_RETURN(ColumnLayout layout, layout_columns(column_bytes, 1));
  const std::span<const std::byte> arena = place.arena.bytes;
  if (place.offset > arena.size() || layout.total_bytes > arena.size() - place.offset) {
    return invalid("table '" + table.name() + "': staged: the columns of " +
                   std::to_string(place.rows) + " rows take " + std::to_string(layout.total_bytes) +
                   " bytes from offset " + std::to_string(place.offset) +
                   ", past the end of the arena's " + std::to_string(arena.size()) + " bytes");
  }
  const auto bytes = arena.subspan(place.offset, layout.total_bytes);
  RowBatch batch;
  batch.n = n;
  batch.staged = std::move(place.arena.keep_alive);
  std::size_t next = view_columns(bytes, layout, 0, encodings, table.schema(), n, batch.rows);
  const std::uint64_t id_bytes = with_episodes ? n * sizeof(std::uint64_t) : 0;
  const std::uint64_t priority_bytes = with_priorities ? n * sizeof(double) : 0;
  batch.payload =
      ByteBuffer(id_bytes + priority_bytes + (with_versions ? n * sizeof(std::uint64_t) : 0));
  if (with_episodes) {
    std::memcpy(batch.payload.data(), bytes.data() + layout.offsets[next++], id_bytes);
    batch.episodes = {batch.payload.as<std::uint64_t>(0), n};
  }
  if (with_priorities) {
    std::memcpy(batch.payload.data() + id_bytes, bytes.data() + layout.offsets[next++],
                n * sizeof(double));
    batch.priorities = {batch.payload.as<double>(id_bytes), n};
  }
  if (with_versions) {
    const std::uint64_t at = id_bytes + priority_bytes;
    std::memcpy(batch.payload.data() + at, bytes.data() + layout.offsets[next++],
                n * sizeof(std::uint64_t));
    batch.version_column = {batch.payload.as<std::uint64_t>(at), n};
  }
  return batch;
}

}  // namespace

Result<RowBatch> decode_row_batch(JsonReader& args, const Table& table, std::uint64_t n,
                                  ByteBuffer& payload, bool with_episodes, std::uint64_t ends,
                                  const StagingLookup* staging) {
  REPLAYD_ASSIGN_OR_RETURN(bool with_priorities, args.boolean_or("priorities", false));
  REPLAYD_ASSIGN_OR_RETURN(bool with_versions, args.boolean_or("versions", false));
  REPLAYD_ASSIGN_OR_RETURN(std::optional<std::uint64_t> version, args.optional_uint("version"));
  if (version && with_versions) {
    return args.error("version",
                      "give either \"version\" (every row's) or \"versions\": true "
                      "(a column of one per row), not both");
  }
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
  if (with_versions) column_bytes.push_back(n * sizeof(std::uint64_t));
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
  if (const json::value* staged = args.value("staged"); staged && !staged->is_null()) {
    if (!final_encodings.empty()) {
      return args.error("staged", "a staged append carries no final_columns");
    }
    if (!payload.empty()) {
      return args.error("staged", "a staged request carries no payload (it has " +
                                      std::to_string(payload.size()) + " bytes)");
    }
    REPLAYD_ASSIGN_OR_RETURN(StagedPlace place, read_staged(args, *staged, table, n, staging));
    REPLAYD_ASSIGN_OR_RETURN(RowBatch batch,
                             view_staged(std::move(place), column_bytes, encodings, table, n,
                                         with_episodes, with_priorities, with_versions));
    batch.version = version;
    return batch;
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
  if (with_versions) {
    batch.version_column = {batch.payload.as<std::uint64_t>(layout.offsets[next++]), n};
  }
  batch.version = version;
  if (!final_encodings.empty())
    view_columns(bytes, layout, next, final_encodings, schema, ends, batch.finals);
  return batch;
}

}  // namespace replayd::service::commands
