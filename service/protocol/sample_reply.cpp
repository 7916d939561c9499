#include "service/protocol/sample_reply.h"

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <charconv>
#include <cstring>

#include "core/rng.h"
#include "service/protocol/batch_layout.h"

namespace replayd::service::commands {
namespace json = boost::json;
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
// `with_rows` false: the draw columns only (a keys-only sample).
std::string sample_meta_prefix(const Schema& schema, std::uint64_t n,
                               const std::vector<std::uint64_t>& offsets, bool with_rows = true,
                               bool with_versions = false) {
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
    add(kSampleInfoColumns[i].first, kSampleInfoColumns[i].second, {}, offsets[i]);
  }
  for (std::size_t f = 0; with_rows && f < schema.size(); ++f) {
    const Field& field = schema.field(f);
    add(field.name, dtype_name(field.dtype), field.shape, offsets[4 + f]);
  }
  if (!with_rows) add("slot", "int64", {}, offsets[4]);
  if (with_versions) add("version", "uint64", {}, offsets.back());
  meta += "]";
  if (!with_rows) meta += ",\"rows\":\"keys\"";
  return meta;
}

std::string number_text(double value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return std::string(text, end);
}

// Fields of at least this many bytes per item go to the socket straight from the table's rows
// (Reply pieces) instead of being copied into the reply first; smaller ones are copied (a
// gathered write costs per piece, a copy of a few bytes does not).
constexpr std::uint64_t kViewedMinItemBytes = 4096;
// At most this many row views per reply (each is one piece of the gathered write).
constexpr std::uint64_t kMaxViewedRows = 1024;
constexpr std::array<std::byte, 8> kZeroPadding{};

// Borrowed-row replies (Reply::pieces): `bytes` of the reply's own payload at `begin`,
// merged into the last piece when it ends there.
void add_owned_piece(Reply& reply, const std::byte* begin, std::uint64_t bytes) {
  auto& pieces = reply.pieces;
  if (!pieces.empty() && pieces.back().data() + pieces.back().size() == begin) {
    pieces.back() = {pieces.back().data(), pieces.back().size() + bytes};
  } else {
    pieces.emplace_back(begin, bytes);
  }
}

// One piece per borrowed row of a column, then zeros up to its `padded` bytes.
void add_row_pieces(Reply& reply, std::span<const std::byte* const> rows, std::uint64_t item_bytes,
                    std::uint64_t padded) {
  for (const std::byte* row : rows)
    reply.pieces.emplace_back(row, item_bytes);
  const std::uint64_t padding = padded - rows.size() * item_bytes;
  if (padding > 0) reply.pieces.emplace_back(kZeroPadding.data(), padding);
}

// The header of a reply whose payload is its pieces.
void encode_pieces_header(Reply& reply) {
  encode_header(FrameHeader{FrameKind::reply, reply.request_id,
                            static_cast<std::uint32_t>(reply.meta.size()), reply.payload_bytes()},
                reply.header);
}

}  // namespace

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

namespace {

std::vector<std::uint64_t> reply_bytes_per_item(const Schema& schema) {
  std::vector<std::uint64_t> bytes_per_item(kSampleInfoBytes.begin(), kSampleInfoBytes.end());
  for (const auto& field : schema.fields())
    bytes_per_item.push_back(field.item_bytes());
  return bytes_per_item;
}

}  // namespace

std::string sampled_state(std::uint32_t size, const SamplingMass& mass) {
  return ",\"state\":{\"size\":" + std::to_string(size) + ",\"mass\":" + number_text(mass.total) +
         ",\"min_mass\":" + number_text(mass.min_positive) + "}";
}

std::uint64_t sample_reply_bytes(const Table& table, std::uint64_t n) {
  return sample_reply_bytes(table.schema(), n);
}

std::uint64_t sample_reply_bytes(const Schema& schema, std::uint64_t n) {
  auto layout = layout_columns(reply_bytes_per_item(schema), n);
  return layout ? kHeaderBytes + layout->total_bytes : UINT64_MAX;
}

Status check_item_fits_frames(const TableConfig& config, std::uint64_t max_frame_bytes,
                              const std::string& where) {
  const Schema& schema = config.schema;
  // An insert of one item: the shortest metadata a client can send (op, table, n, columns),
  // then the item's columns, each padded to 8 bytes.
  json::array columns;
  std::vector<std::uint64_t> field_bytes;
  for (const auto& field : schema.fields()) {
    json::array shape{1};
    for (auto dim : field.shape)
      shape.push_back(dim);
    columns.push_back(json::object{
        {"name", field.name}, {"dtype", dtype_name(field.dtype)}, {"shape", std::move(shape)}});
    field_bytes.push_back(field.item_bytes());
  }
  const std::string insert_meta = json::serialize(json::object{
      {"op", "insert"}, {"table", config.name}, {"n", 1}, {"columns", std::move(columns)}});
  auto insert_layout = layout_columns(field_bytes, 1);
  const std::uint64_t insert_bytes =
      insert_layout ? kHeaderBytes + insert_meta.size() + insert_layout->total_bytes : UINT64_MAX;
  // The reply to a sample of one item, its metadata at its longest (the widest state).
  auto reply_layout = layout_columns(reply_bytes_per_item(schema), 1);
  const std::uint64_t reply_bytes =
      reply_layout
          ? kHeaderBytes + sample_meta_prefix(schema, 1, reply_layout->offsets).size() +
                sampled_state(UINT32_MAX, {-1.7976931348623157e308, -2.2250738585072014e-308})
                    .size() +
                1 + reply_layout->total_bytes
          : UINT64_MAX;
  auto refuse = [&](const char* frame, std::uint64_t bytes) {
    return make_error(ErrorCode::invalid_argument,
                      where + ": one item is " + std::to_string(schema.item_bytes()) +
                          " bytes, so " + frame + " of one item is a frame of at least " +
                          std::to_string(bytes) +
                          " bytes, more than max_frame_bytes = " + std::to_string(max_frame_bytes) +
                          "; such a table could never be filled or sampled");
  };
  if (insert_bytes > max_frame_bytes) return refuse("an insert", insert_bytes);
  if (reply_bytes > max_frame_bytes) return refuse("the reply to a sample", reply_bytes);
  return Ok{};
}

std::vector<ReplyColumn> draw_columns(const std::vector<std::uint64_t>& leading) {
  std::vector<ReplyColumn> columns;
  for (std::size_t i = 0; i < kSampleInfoColumns.size(); ++i) {
    columns.push_back({kSampleInfoColumns[i].first,
                       kSampleInfoColumns[i].second,
                       {},
                       kSampleInfoBytes[i],
                       leading});
  }
  return columns;
}

ReplyColumn field_column(const Field& field, bool viewed) {
  return {field.name,
          std::string(dtype_name(field.dtype)),
          {field.shape.begin(), field.shape.end()},
          field.item_bytes(),
          {},
          viewed};
}

namespace {

ReplyColumn version_column() {
  return ReplyColumn{"version", "uint64", {}, sizeof(std::uint64_t), {}, false};
}

}  // namespace

Result<PlainSampleReply> plain_sample_reply(const Schema& schema, std::uint64_t n, bool with_rows,
                                            bool with_versions, bool view_large,
                                            std::span<std::byte> into) {
  const bool in_arena = !into.empty();
  if (in_arena) view_large = false;
  if (!with_rows) {
    std::vector<ReplyColumn> columns = draw_columns();
    columns.push_back(ReplyColumn{"slot", "int64", {}, sizeof(std::int64_t), {}, false});
    if (with_versions) columns.push_back(version_column());
    REPLAYD_ASSIGN_OR_RETURN(ColumnReply reply, ColumnReply::create(std::move(columns), {n}));
    return PlainSampleReply{std::move(reply), {}, {}, false, with_versions};
  }
  const std::vector<bool> viewed =
      view_large ? viewed_fields(schema, n) : std::vector<bool>(schema.size(), false);
  std::vector<ReplyColumn> reply_columns = draw_columns();
  for (std::size_t f = 0; f < schema.size(); ++f)
    reply_columns.push_back(field_column(schema.field(f), viewed[f]));
  if (with_versions) reply_columns.push_back(version_column());
  REPLAYD_ASSIGN_OR_RETURN(ColumnReply reply,
                           in_arena ? ColumnReply::create_in(std::move(reply_columns), {n}, into)
                                    : ColumnReply::create(std::move(reply_columns), {n}));
  PlainSampleReply sample{std::move(reply),
                          {},
                          std::vector<std::span<const std::byte*>>(schema.size()),
                          true,
                          with_versions};
  for (std::size_t f = 0; f < schema.size(); ++f) {
    if (viewed[f]) {
      sample.columns.emplace_back();
      sample.rows[f] = sample.reply.rows(4 + f);
    } else {
      sample.columns.push_back(sample.reply.column(4 + f));
    }
  }
  return sample;
}

void PlainSampleReply::fill_slots(std::uint64_t slot_bits) {
  const auto keys = reply.as<std::uint64_t>(0);
  const auto slots = reply.as<std::int64_t>(4);
  const std::uint64_t mask = (std::uint64_t{1} << slot_bits) - 1;
  for (std::size_t i = 0; i < keys.size(); ++i)
    slots[i] = static_cast<std::int64_t>(keys[i] & mask);
}

void PlainSampleReply::fill_slots(std::uint64_t slot_bits, std::uint64_t begin,
                                  std::uint64_t count) {
  const auto keys = reply.as<std::uint64_t>(0).subspan(begin, count);
  const auto slots = reply.as<std::int64_t>(4).subspan(begin, count);
  const std::uint64_t mask = (std::uint64_t{1} << slot_bits) - 1;
  for (std::size_t i = 0; i < keys.size(); ++i)
    slots[i] = static_cast<std::int64_t>(keys[i] & mask);
}

SampleBuffers PlainSampleReply::buffers(std::uint64_t begin, std::uint64_t count,
                                        std::vector<std::span<std::byte>>& part_columns,
                                        std::vector<std::span<const std::byte*>>& part_rows) {
  const std::uint64_t n = reply.as<std::uint64_t>(0).size();
  part_columns.clear();
  part_rows.clear();
  for (std::size_t f = 0; f < columns.size(); ++f) {
    const std::uint64_t row_bytes = columns[f].size() / n;
    part_columns.push_back(
        columns[f].empty() ? columns[f] : columns[f].subspan(begin * row_bytes, count * row_bytes));
  }
  for (std::size_t f = 0; f < rows.size(); ++f)
    part_rows.push_back(rows[f].empty() ? rows[f] : rows[f].subspan(begin, count));
  return SampleBuffers{
      reply.as<std::uint64_t>(0).subspan(begin, count),
      reply.as<double>(1).subspan(begin, count),
      reply.as<double>(2).subspan(begin, count),
      reply.as<std::uint32_t>(3).subspan(begin, count),
      part_columns,
      part_rows,
      with_versions ? versions().subspan(begin, count) : std::span<std::uint64_t>{}};
}

SampleBuffers PlainSampleReply::buffers() {
  return SampleBuffers{reply.as<std::uint64_t>(0),
                       reply.as<double>(1),
                       reply.as<double>(2),
                       reply.as<std::uint32_t>(3),
                       columns,
                       rows,
                       with_versions ? versions() : std::span<std::uint64_t>{}};
}

std::span<std::uint64_t> PlainSampleReply::versions() {
  return reply.as<std::uint64_t>(reply.offsets().size() - 1);
}

namespace {

// The metadata up to the column list of a sample laid out as `sample` (n rows, or keys
// only), from the cached one (`cached_n`, `cached_rows`, `cached`) when the last sample was
// laid out the same: learners repeat one n.
// (A reply with a version column is rare enough not to be cached: its prefix is made anew.)
const std::string& cached_meta_prefix(std::uint64_t& cached_n, bool& cached_rows,
                                      std::string& cached, const Schema& schema,
                                      PlainSampleReply& sample) {
  const std::uint64_t n = sample.reply.as<std::uint64_t>(0).size();
  if (sample.with_versions) {
    thread_local std::string uncached;
    uncached = sample_meta_prefix(schema, n, sample.reply.offsets(), sample.with_rows, true);
    return uncached;
  }
  if (cached_n != n || cached_rows != sample.with_rows) {
    cached = sample_meta_prefix(schema, n, sample.reply.offsets(), sample.with_rows);
    cached_n = n;
    cached_rows = sample.with_rows;
  }
  return cached;
}

}  // namespace

Reply finish_plain_sample(HostedTable& hosted, PlainSampleReply& sample, std::uint64_t request_id,
                          std::uint32_t size, const SamplingMass& mass,
                          std::string_view extra_meta) {
  std::string meta = cached_meta_prefix(hosted.cached_sample_n, hosted.cached_sample_rows,
                                        hosted.cached_sample_meta, hosted.table->schema(), sample);
  meta += extra_meta;
  meta += sampled_state(size, mass);
  meta += '}';
  return sample.reply.finish_with_meta(request_id, std::move(meta));
}

Reply finish_mixed_sample(HostedTable& first, PlainSampleReply& sample, std::uint64_t request_id,
                          std::string_view parts_meta) {
  std::string meta = cached_meta_prefix(first.cached_mixed_n, first.cached_mixed_rows,
                                        first.cached_mixed_meta, first.table->schema(), sample);
  meta += parts_meta;
  meta += '}';
  return sample.reply.finish_with_meta(request_id, std::move(meta));
}

namespace {

// Bytes of each column (rows * item_bytes, saturating), rows the product of its leading dims.
std::vector<std::uint64_t> column_bytes(const std::vector<ReplyColumn>& columns,
                                        const std::vector<std::uint64_t>& leading) {
  std::vector<std::uint64_t> bytes;
  for (const auto& column : columns) {
    uint128 total = column.item_bytes;
    for (auto dim : column.leading.empty() ? leading : column.leading)
      total = std::min<uint128>(total * dim, UINT64_MAX);
    bytes.push_back(static_cast<std::uint64_t>(total));
  }
  return bytes;
}

}  // namespace

std::uint64_t ColumnReply::frame_bytes(const std::vector<ReplyColumn>& columns,
                                       const std::vector<std::uint64_t>& leading) {
  auto layout = layout_columns(column_bytes(columns, leading), 1);
  return layout ? kHeaderBytes + layout->total_bytes : UINT64_MAX;
}

Result<ColumnReply> ColumnReply::create(std::vector<ReplyColumn> columns,
                                        std::vector<std::uint64_t> leading) {
  return lay_out(std::move(columns), std::move(leading), {}, false);
}

Result<ColumnReply> ColumnReply::create_in(std::vector<ReplyColumn> columns,
                                           std::vector<std::uint64_t> leading,
                                           std::span<std::byte> target) {
  return lay_out(std::move(columns), std::move(leading), target, true);
}

Result<ColumnReply> ColumnReply::lay_out(std::vector<ReplyColumn> columns,
                                         std::vector<std::uint64_t> leading,
                                         std::span<std::byte> target, bool in_target) {
  ColumnReply reply;
  reply.bytes_ = column_bytes(columns, leading);
  REPLAYD_ASSIGN_OR_RETURN(ColumnLayout layout, layout_columns(reply.bytes_, 1));
  if (in_target) {
    if (std::any_of(columns.begin(), columns.end(), [](const ReplyColumn& c) { return c.viewed; }))
      return make_error(ErrorCode::failed_precondition,
                        "a reply laid out in an arena views no column");
    if (layout.total_bytes > target.size()) {
      return make_error(ErrorCode::invalid_argument,
                        "into: the reply's columns take " + std::to_string(layout.total_bytes) +
                            " bytes; the region from the offset to the arena's end holds " +
                            std::to_string(target.size()) +
                            " (a region of at least that many bytes, or a smaller sample)");
    }
    reply.external_ = target.data();
  }
  // The payload holds the columns not viewed, each padded as on the wire.
  reply.owned_at_.assign(columns.size(), 0);
  reply.rows_.resize(columns.size());
  std::uint64_t owned = 0;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const std::uint64_t end = i + 1 < columns.size() ? layout.offsets[i + 1] : layout.total_bytes;
    if (columns[i].viewed) {
      reply.rows_[i].resize(columns[i].item_bytes ? reply.bytes_[i] / columns[i].item_bytes : 0);
      continue;
    }
    reply.owned_at_[i] = owned;
    owned += end - layout.offsets[i];
  }
  if (!in_target) reply.payload_ = ByteBuffer(owned);
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].viewed) continue;
    const std::uint64_t end = i + 1 < columns.size() ? layout.offsets[i + 1] : layout.total_bytes;
    const std::uint64_t padding = end - layout.offsets[i] - reply.bytes_[i];
    // An empty reply (a last page of no rows) has no buffer at all: nothing to clear.
    if (padding > 0) {
      std::memset(reply.owned_base() + reply.owned_at_[i] + reply.bytes_[i], 0, padding);
    }
  }
  reply.offsets_ = std::move(layout.offsets);
  reply.total_bytes_ = layout.total_bytes;
  reply.columns_ = std::move(columns);
  reply.leading_ = std::move(leading);
  return reply;
}

Result<std::size_t> ColumnReply::extend(std::vector<ReplyColumn> columns) {
  if (external_ != nullptr)
    return make_error(ErrorCode::failed_precondition, "a reply laid out in an arena cannot grow");
  const std::size_t first = columns_.size();
  std::vector<ReplyColumn> all = columns_;
  all.insert(all.end(), std::make_move_iterator(columns.begin()),
             std::make_move_iterator(columns.end()));
  REPLAYD_ASSIGN_OR_RETURN(ColumnReply grown, create(std::move(all), leading_));
  for (std::size_t i = 0; i < first; ++i) {
    if (columns_[i].viewed) {
      grown.rows_[i] = std::move(rows_[i]);
    } else if (bytes_[i] > 0) {
      std::memcpy(grown.column(i).data(), column(i).data(), bytes_[i]);
    }
  }
  *this = std::move(grown);
  return first;
}

std::span<std::byte> ColumnReply::column(std::size_t i) {
  return {owned_base() + owned_at_[i], bytes_[i]};
}

Reply ColumnReply::finish(std::uint64_t request_id, std::string_view extra_meta) {
  json::array list;
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    json::array shape;
    for (auto dim : columns_[i].leading.empty() ? leading_ : columns_[i].leading)
      shape.push_back(dim);
    for (auto dim : columns_[i].shape)
      shape.push_back(dim);
    list.push_back(json::object{{"name", columns_[i].name},
                                {"dtype", columns_[i].dtype},
                                {"shape", std::move(shape)},
                                {"offset", offsets_[i]}});
  }
  std::string meta = "{\"n\":" + std::to_string(leading_.empty() ? 0 : leading_[0]) +
                     ",\"columns\":" + json::serialize(list);
  meta.append(extra_meta).append("}");
  return finish_with_meta(request_id, std::move(meta));
}

Reply ColumnReply::finish_with_meta(std::uint64_t request_id, std::string meta) {
  if (external_ != nullptr) return make_reply(request_id, std::move(meta), ByteBuffer());
  const std::byte* owned = payload_.data();
  Reply reply = make_reply(request_id, std::move(meta), std::move(payload_));
  const bool views = std::any_of(columns_.begin(), columns_.end(),
                                 [](const ReplyColumn& column) { return column.viewed; });
  if (!views) return reply;
  // The wire payload as pieces: owned runs (adjacent columns merged) and one piece per row.
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    const std::uint64_t end = i + 1 < columns_.size() ? offsets_[i + 1] : total_bytes_;
    const std::uint64_t padded = end - offsets_[i];
    if (columns_[i].viewed) {
      add_row_pieces(reply, rows_[i], columns_[i].item_bytes, padded);
    } else {
      add_owned_piece(reply, owned + owned_at_[i], padded);
    }
  }
  encode_pieces_header(reply);
  return reply;
}

}  // namespace replayd::service::commands
