#include "service/protocol/column_decoding.h"

#include <algorithm>

#include "service/protocol/json_reader.h"

namespace replayd::service::commands {
namespace json = boost::json;
namespace {

Error invalid(const std::string& message) {
  return make_error(ErrorCode::invalid_argument, message);
}

// Checks one entry of a column list against `field`. Runs for every column of every insert:
// error messages are composed only when a check fails.
Result<ColumnEncoding> check_column(const json::value& column, std::size_t index,
                                    std::size_t field_index, const Field& field, std::uint64_t rows,
                                    const std::string& table) {
  const auto where = [&] {
    return "table '" + table + "': columns[" + std::to_string(index) + "]";
  };
  const auto who = [&] { return "table '" + table + "': field '" + field.name + "'"; };
  if (!column.is_object()) return invalid(where() + ": expected an object");
  JsonReader reader(column.get_object(), "columns[" + std::to_string(index) + "]");
  REPLAYD_ASSIGN_OR_RETURN(std::string name, reader.string("name"));
  if (name != field.name) {
    return invalid(where() + ": column '" + name + "' where the table's field " +
                   std::to_string(index) + " is '" + field.name +
                   "' (send every field, in the table's order)");
  }
  REPLAYD_ASSIGN_OR_RETURN(std::string dtype, reader.string("dtype"));
  if (dtype != dtype_name(field.dtype)) {
    return invalid(who() + ": dtype " + dtype + " does not match the table's " +
                   std::string(dtype_name(field.dtype)));
  }
  // The expected shape is [rows] + the field's shape.
  const std::size_t dims = field.shape.size() + 1;
  const auto expected_dim = [&](std::size_t d) -> std::uint64_t {
    return d == 0 ? rows : field.shape[d - 1];
  };
  const auto expected_text = [&] {
    json::array expected;
    for (std::size_t d = 0; d < dims; ++d)
      expected.push_back(expected_dim(d));
    return json::serialize(expected);
  };
  const json::value* shape = reader.value("shape");
  if (!shape || !shape->is_array() || shape->get_array().size() != dims) {
    return invalid(who() + ": shape must be " + expected_text() + " ([n] + the field's shape)");
  }
  for (std::size_t d = 0; d < dims; ++d) {
    const auto dim = as_uint(shape->get_array()[d]);
    if (!dim || *dim != expected_dim(d)) {
      return invalid(who() + ": shape " + json::serialize(*shape) + " does not match " +
                     expected_text() + " ([n] + the field's shape)");
    }
  }
  ColumnEncoding encoding{field_index, field.compression != Compression::none, 0};
  if (encoding.compressed) {
    const json::value* compression = reader.value("compression");
    if (!compression || !compression->is_string() || compression->get_string() != "zstd") {
      return invalid(who() +
                     " is compressed: its column must say \"compression\": \"zstd\" and "
                     "give the frames' total \"bytes\"");
    }
    REPLAYD_ASSIGN_OR_RETURN(encoding.frame_bytes, reader.uint("bytes"));
  }
  REPLAYD_RETURN_IF_ERROR(reader.finish());
  return encoding;
}

}  // namespace

Result<std::vector<ColumnEncoding>> decode_columns(const json::array& list,
                                                   std::span<const std::size_t> fields,
                                                   const Table& table, std::uint64_t rows,
                                                   std::vector<std::uint64_t>& column_bytes) {
  std::vector<ColumnEncoding> encodings;
  encodings.reserve(fields.size());
  column_bytes.reserve(column_bytes.size() + 2 * fields.size());
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const Field& field = table.schema().field(fields[i]);
    REPLAYD_ASSIGN_OR_RETURN(auto encoding,
                             check_column(list[i], i, fields[i], field, rows, table.name()));
    if (encoding.compressed) {
      column_bytes.push_back(rows * sizeof(std::uint32_t));
      column_bytes.push_back(encoding.frame_bytes);
    } else {
      column_bytes.push_back(rows * field.item_bytes());
    }
    encodings.push_back(encoding);
  }
  return encodings;
}

std::size_t view_columns(std::span<const std::byte> payload, const ColumnLayout& layout,
                         std::size_t first, std::span<const ColumnEncoding> encodings,
                         const Schema& schema, std::uint64_t rows, ColumnViews& views) {
  views.values.resize(schema.size());
  std::size_t column = first;
  for (const auto& encoding : encodings) {
    const std::byte* at = payload.data() + layout.offsets[column++];
    if (!encoding.compressed) {
      views.values[encoding.field] = {at, rows * schema.field(encoding.field).item_bytes()};
      continue;
    }
    views.frame_sizes.resize(schema.size());
    views.frame_sizes[encoding.field] = {reinterpret_cast<const std::uint32_t*>(at), rows};
    views.values[encoding.field] = {payload.data() + layout.offsets[column++],
                                    encoding.frame_bytes};
  }
  return column;
}

std::vector<std::span<const std::byte>> row_values(const ColumnViews& views, const Schema& schema,
                                                   std::uint64_t row) {
  std::vector<std::span<const std::byte>> values(schema.size());
  for (std::size_t f = 0; f < views.values.size(); ++f) {
    const auto column = views.values[f];
    if (column.empty()) continue;
    const bool compressed = f < views.frame_sizes.size() && !views.frame_sizes[f].empty();
    if (!compressed) {
      const std::uint64_t bytes = schema.field(f).item_bytes();
      values[f] = column.subspan(row * bytes, bytes);
      continue;
    }
    const auto sizes = views.frame_sizes[f];
    std::uint64_t offset = 0;
    for (std::uint64_t i = 0; i < row; ++i)
      offset += sizes[i];
    // Sizes that overrun the column give an empty value, which the table refuses.
    if (offset <= column.size() && sizes[row] <= column.size() - offset) {
      values[f] = column.subspan(offset, sizes[row]);
    }
  }
  return values;
}

std::vector<std::size_t> next_of_fields(const Schema& schema) {
  std::vector<std::size_t> fields;
  for (std::size_t f = 0; f < schema.size(); ++f)
    if (schema.field(f).next_of) fields.push_back(f);
  return fields;
}

}  // namespace replayd::service::commands
