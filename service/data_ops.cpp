// The data path: insert, sample, update_priorities, delete. Column payloads are validated
// against the table's schema before anything is stored; samples are copied by the table
// straight into the reply payload.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "core/batch_layout.h"
#include "service/ops.h"

namespace replayd::service {
namespace json = boost::json;
namespace {

Error invalid(const std::string& message) {
  return make_error(ErrorCode::invalid_argument, message);
}

Result<std::uint64_t> batch_items(ServiceContext& context, JsonReader& request) {
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t n, request.uint("n"));
  if (n == 0) return request.error("n", "must be >= 1");
  if (n > context.limits.max_batch_items) {
    return make_error(ErrorCode::resource_exhausted,
                      "n: " + std::to_string(n) + " exceeds max_batch_items = " +
                          std::to_string(context.limits.max_batch_items));
  }
  return n;
}

Result<std::optional<std::chrono::milliseconds>> timeout_of(JsonReader& request) {
  REPLAYD_ASSIGN_OR_RETURN(auto ms, request.optional_uint("timeout_ms"));
  if (!ms) return std::optional<std::chrono::milliseconds>();
  if (*ms > (std::uint64_t{1} << 40)) return request.error("timeout_ms", "is too large");
  return std::optional<std::chrono::milliseconds>(std::chrono::milliseconds(*ms));
}

std::string shape_text(const json::array& shape) {
  return json::serialize(shape);
}

// Checks one entry of an insert's "columns" against field `index` of the schema.
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
  if (!shape || !shape->is_array() || shape->get_array().size() != expected.size()) {
    return invalid(who + ": shape must be " + shape_text(expected) + " ([n] + the field's shape)");
  }
  for (std::size_t d = 0; d < expected.size(); ++d) {
    const auto dim = as_uint(shape->get_array()[d]);
    if (!dim || *dim != expected[d].as_uint64()) {
      return invalid(who + ": shape " + json::serialize(*shape) + " does not match " +
                     shape_text(expected) + " ([n] + the field's shape)");
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

Result<PreparedInsert> prepare_insert(ServiceContext& context, JsonReader& request, Frame& frame) {
  REPLAYD_ASSIGN_OR_RETURN(auto hosted, find_table(context, request));
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t n, batch_items(context, request));
  REPLAYD_ASSIGN_OR_RETURN(bool with_priorities, request.boolean_or("priorities", false));
  REPLAYD_ASSIGN_OR_RETURN(auto timeout, timeout_of(request));
  const json::value* columns = request.value("columns");
  REPLAYD_RETURN_IF_ERROR(request.finish());

  const Table& table = *hosted->table;
  const auto& fields = table.schema().fields();
  if (!columns || !columns->is_array()) {
    return invalid("table '" + table.name() +
                   "': columns: expected an array describing every field");
  }
  const auto& list = columns->get_array();
  if (list.size() != fields.size()) return column_count_error(list, table);
  std::vector<std::uint64_t> bytes_per_item;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    REPLAYD_RETURN_IF_ERROR(check_column(list[i], i, fields[i], n, table.name()));
    bytes_per_item.push_back(fields[i].item_bytes());
  }
  if (with_priorities) bytes_per_item.push_back(sizeof(double));
  REPLAYD_ASSIGN_OR_RETURN(ColumnLayout layout, layout_columns(bytes_per_item, n));
  if (layout.total_bytes != frame.payload.size()) {
    return invalid("table '" + table.name() + "': payload holds " +
                   std::to_string(frame.payload.size()) + " bytes, the columns need " +
                   std::to_string(layout.total_bytes));
  }

  PreparedInsert prepared;
  prepared.request_id = frame.header.request_id;
  prepared.table = std::move(hosted);
  prepared.n = n;
  prepared.timeout = timeout;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    prepared.columns.emplace_back(frame.payload.data() + layout.offsets[i], n * bytes_per_item[i]);
  }
  if (with_priorities) {
    prepared.priorities = {frame.payload.as<double>(layout.offsets.back()), n};
  }
  return prepared;
}

Reply execute_insert(PreparedInsert& insert) {
  ByteBuffer keys(insert.n * sizeof(std::uint64_t));
  auto status = insert.table->table->insert(insert.columns, insert.n, insert.priorities,
                                            {keys.as<std::uint64_t>(0), insert.n});
  if (!status) return make_error_reply(insert.request_id, status.error());
  return make_reply(insert.request_id, "{\"n\":" + std::to_string(insert.n) + "}", std::move(keys));
}

Result<PreparedSample> prepare_sample(ServiceContext& context, JsonReader& request) {
  REPLAYD_ASSIGN_OR_RETURN(auto hosted, find_table(context, request));
  PreparedSample prepared;
  REPLAYD_ASSIGN_OR_RETURN(prepared.n, batch_items(context, request));
  REPLAYD_ASSIGN_OR_RETURN(prepared.beta, request.number_or("beta", 0.4));
  REPLAYD_ASSIGN_OR_RETURN(prepared.timeout, timeout_of(request));
  REPLAYD_RETURN_IF_ERROR(request.finish());
  if (!std::isfinite(prepared.beta) || prepared.beta < 0) {
    return request.error("beta", "must be finite and >= 0");
  }
  prepared.table = std::move(hosted);
  return prepared;
}

namespace {

// The four per-draw columns that precede the table's fields in a sample reply.
constexpr std::array<std::pair<const char*, const char*>, 4> kSampleInfoColumns{
    {{"key", "uint64"},
     {"probability", "float64"},
     {"weight", "float64"},
     {"times_sampled", "uint32"}}};
constexpr std::array<std::uint64_t, 4> kSampleInfoBytes{8, 8, 8, 4};

// The reply metadata up to the column list; the caller appends the table state and the
// closing brace.
std::string sample_meta_prefix(const Schema& schema, std::uint64_t n, const ColumnLayout& layout) {
  std::string meta = "{\"n\":" + std::to_string(n) + ",\"columns\":[";
  const std::string n_text = std::to_string(n);
  auto add = [&](std::string_view name, std::string_view dtype,
                 const std::vector<std::uint64_t>& shape, std::uint64_t offset) {
    if (meta.back() != '[') meta += ',';
    meta.append("{\"name\":").append(json::serialize(json::string(name)));
    meta.append(",\"dtype\":\"").append(dtype).append("\",\"shape\":[").append(n_text);
    for (auto dim : shape)
      meta.append(",").append(std::to_string(dim));
    meta.append("],\"offset\":").append(std::to_string(offset)).append("}");
  };
  for (std::size_t i = 0; i < kSampleInfoColumns.size(); ++i) {
    add(kSampleInfoColumns[i].first, kSampleInfoColumns[i].second, {}, layout.offsets[i]);
  }
  for (std::size_t f = 0; f < schema.size(); ++f) {
    const Field& field = schema.field(f);
    add(field.name, dtype_name(field.dtype), field.shape, layout.offsets[4 + f]);
  }
  meta += "]";
  return meta;
}

std::string number_text(double value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return std::string(text, end);
}

// The table as the draws saw it: a client sampling several shards combines them with it.
std::string sampled_state(std::uint32_t size, const SamplingMass& mass) {
  return ",\"state\":{\"size\":" + std::to_string(size) + ",\"mass\":" + number_text(mass.total) +
         ",\"min_mass\":" + number_text(mass.min_positive) + "}}";
}

}  // namespace

namespace {

// Fields of at least this many bytes per item go to the socket straight from the table's rows
// (Reply pieces) instead of being copied into the reply first; smaller ones are copied (a
// gathered write costs per piece, a copy of a few bytes does not).
constexpr std::uint64_t kViewedMinItemBytes = 4096;
// At most this many row views per reply (each is one piece of the gathered write).
constexpr std::uint64_t kMaxViewedRows = 1024;
constexpr std::array<std::byte, 8> kZeroPadding{};

// Which fields a sample of n items views in place.
std::vector<bool> viewed_fields(const Schema& schema, std::uint64_t n) {
  std::vector<bool> viewed(schema.size(), false);
  std::uint64_t rows = 0;
  for (std::size_t f = 0; f < schema.size(); ++f) {
    if (schema.field(f).item_bytes() >= kViewedMinItemBytes && rows + n <= kMaxViewedRows) {
      viewed[f] = true;
      rows += n;
    }
  }
  return viewed;
}

}  // namespace

Reply execute_sample(PreparedSample& sample) {
  HostedTable& hosted = *sample.table;
  const Schema& schema = hosted.table->schema();
  const std::uint64_t n = sample.n;
  std::vector<std::uint64_t> bytes_per_item(kSampleInfoBytes.begin(), kSampleInfoBytes.end());
  for (const auto& field : schema.fields())
    bytes_per_item.push_back(field.item_bytes());
  auto layout = layout_columns(bytes_per_item, n);
  if (!layout) return make_error_reply(sample.request_id, layout.error());
  const auto& offsets = layout->offsets;
  auto column_end = [&](std::size_t i) {
    return i + 1 < bytes_per_item.size() ? offsets[i + 1] : layout->total_bytes;
  };

  // The reply owns the per-draw columns and the copied fields, packed in wire order with
  // their padding; viewed fields stay in the table and are written from there.
  const std::vector<bool> viewed = viewed_fields(schema, n);
  const bool views = std::find(viewed.begin(), viewed.end(), true) != viewed.end();
  auto is_viewed = [&](std::size_t column) { return column >= 4 && viewed[column - 4]; };
  std::vector<std::uint64_t> owned_at(bytes_per_item.size(), 0);
  std::uint64_t owned_bytes = 0;
  for (std::size_t i = 0; i < bytes_per_item.size(); ++i) {
    if (is_viewed(i)) continue;
    owned_at[i] = owned_bytes;
    owned_bytes += column_end(i) - offsets[i];
  }
  ByteBuffer payload(owned_bytes);
  std::vector<std::span<std::byte>> columns;
  // Row pointers only when a field is viewed: the common small-item sample allocates none.
  std::vector<std::vector<const std::byte*>> row_pointers(views ? schema.size() : 0);
  std::vector<std::span<const std::byte*>> rows(views ? schema.size() : 0);
  for (std::size_t i = 0; i < bytes_per_item.size(); ++i) {
    const std::uint64_t used = n * bytes_per_item[i];
    if (is_viewed(i)) {
      row_pointers[i - 4].resize(n);
      rows[i - 4] = row_pointers[i - 4];
      columns.emplace_back();
      continue;
    }
    // Padding after each column goes out as zeros, never as stale heap bytes.
    std::memset(payload.data() + owned_at[i] + used, 0, column_end(i) - offsets[i] - used);
    if (i >= 4) columns.emplace_back(payload.data() + owned_at[i], used);
  }
  SampleBuffers buffers{{payload.as<std::uint64_t>(owned_at[0]), n},
                        {payload.as<double>(owned_at[1]), n},
                        {payload.as<double>(owned_at[2]), n},
                        {payload.as<std::uint32_t>(owned_at[3]), n},
                        columns,
                        rows};
  const std::uint32_t size_before = hosted.table->size();
  const SamplingMass mass_before = hosted.table->sampling_mass();
  auto status = hosted.table->sample(n, sample.beta, buffers);
  if (!status) return make_error_reply(sample.request_id, status.error());
  if (hosted.cached_sample_n != n) {
    hosted.cached_sample_meta = sample_meta_prefix(schema, n, *layout);
    hosted.cached_sample_n = n;
  }
  const std::byte* owned = payload.data();
  Reply reply = make_reply(sample.request_id,
                           hosted.cached_sample_meta + sampled_state(size_before, mass_before),
                           std::move(payload));
  if (!views) return reply;
  // The wire payload as pieces: owned runs (adjacent columns merged) and one piece per row.
  for (std::size_t i = 0; i < bytes_per_item.size(); ++i) {
    const std::uint64_t padded = column_end(i) - offsets[i];
    if (!is_viewed(i)) {
      const std::byte* begin = owned + owned_at[i];
      auto& last = reply.pieces;
      if (!last.empty() && last.back().data() + last.back().size() == begin) {
        last.back() = {last.back().data(), last.back().size() + padded};
      } else {
        last.emplace_back(begin, padded);
      }
      continue;
    }
    for (const std::byte* row : row_pointers[i - 4])
      reply.pieces.emplace_back(row, bytes_per_item[i]);
    const std::uint64_t padding = padded - n * bytes_per_item[i];
    if (padding > 0) reply.pieces.emplace_back(kZeroPadding.data(), padding);
  }
  encode_header(FrameHeader{FrameKind::reply, sample.request_id,
                            static_cast<std::uint32_t>(reply.meta.size()), reply.payload_bytes()},
                reply.header);
  return reply;
}

Result<std::string> op_update_priorities(ServiceContext& context, JsonReader& request,
                                         const Frame& frame) {
  REPLAYD_ASSIGN_OR_RETURN(auto hosted, find_table(context, request));
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t n, batch_items(context, request));
  REPLAYD_RETURN_IF_ERROR(request.finish());
  if (frame.payload.size() != 16 * n) {
    return invalid("table '" + hosted->table->name() + "': payload holds " +
                   std::to_string(frame.payload.size()) + " bytes, " + std::to_string(n) +
                   " keys and priorities need " + std::to_string(16 * n));
  }
  REPLAYD_ASSIGN_OR_RETURN(UpdateOutcome outcome,
                           hosted->table->update_priorities({frame.payload.as<std::uint64_t>(0), n},
                                                            {frame.payload.as<double>(8 * n), n}));
  return "{\"applied\":" + std::to_string(outcome.applied) +
         ",\"stale\":" + std::to_string(outcome.stale) + "}";
}

Result<std::string> op_delete(ServiceContext& context, JsonReader& request, const Frame& frame) {
  REPLAYD_ASSIGN_OR_RETURN(auto hosted, find_table(context, request));
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t n, batch_items(context, request));
  REPLAYD_RETURN_IF_ERROR(request.finish());
  if (frame.payload.size() != 8 * n) {
    return invalid("table '" + hosted->table->name() + "': payload holds " +
                   std::to_string(frame.payload.size()) + " bytes, " + std::to_string(n) +
                   " keys need " + std::to_string(8 * n));
  }
  const DeleteOutcome outcome = hosted->table->delete_keys({frame.payload.as<std::uint64_t>(0), n});
  table_changed(*hosted);
  return "{\"deleted\":" + std::to_string(outcome.deleted) +
         ",\"stale\":" + std::to_string(outcome.stale) + "}";
}

}  // namespace replayd::service
