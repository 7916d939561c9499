#include "replayd_client/columns.h"

#include <array>

#include "replayd_client/error.h"
#include "replayd_client/wire/json_text.h"
#include "replayd_client/wire/wire_frame_codec.h"

namespace replayd::client {
namespace {

constexpr std::array<std::byte, kColumnAlignment> kPadding{};

}  // namespace

InsertBatch::InsertBatch(std::uint64_t n) : n_(n) {}

void InsertBatch::clear(std::uint64_t n) {
  n_ = n;
  used_columns_ = 0;
  pieces_.clear();
  has_priorities_ = false;
  priority_pieces_ = 0;
}

void InsertBatch::add_piece(std::span<const std::byte> data) {
  pieces_.push_back(data);
  if (const std::size_t pad = padding_after(data.size()); pad != 0) {
    pieces_.push_back(std::span(kPadding).first(pad));
  }
}

InsertBatch& InsertBatch::add(std::string_view name, DType dtype,
                              std::span<const std::uint64_t> item_shape,
                              std::span<const std::byte> data) {
  if (has_priorities_) {
    throw Error(ErrorCode::invalid_argument,
                "column '" + std::string(name) + "' added after the priorities; add fields first");
  }
  std::uint64_t values = n_;
  for (const auto dim : item_shape)
    values *= dim;
  const std::uint64_t expected = values * dtype_bytes(dtype);
  if (data.size() != expected) {
    throw Error(ErrorCode::invalid_argument,
                "column '" + std::string(name) + "': " + std::to_string(data.size()) +
                    " bytes given, " + std::to_string(n_) + " items of " +
                    std::string(dtype_name(dtype)) + " with this shape need " +
                    std::to_string(expected));
  }
  next_column(name, dtype, item_shape);
  add_piece(data);
  return *this;
}

InsertBatch::Column& InsertBatch::next_column(std::string_view name, DType dtype,
                                              std::span<const std::uint64_t> item_shape) {
  if (used_columns_ == columns_.size()) columns_.emplace_back();
  Column& column = columns_[used_columns_++];
  column.name.assign(name);
  column.dtype = dtype;
  column.item_shape.assign(item_shape.begin(), item_shape.end());
  column.compressed_bytes.reset();
  return column;
}

InsertBatch& InsertBatch::add_compressed(std::string_view name, DType dtype,
                                         std::span<const std::uint64_t> item_shape,
                                         std::span<const std::uint32_t> frame_sizes,
                                         std::span<const std::byte> frames) {
  if (has_priorities_) {
    throw Error(ErrorCode::invalid_argument,
                "column '" + std::string(name) + "' added after the priorities; add fields first");
  }
  std::uint64_t total = 0;
  for (const auto size : frame_sizes)
    total += size;
  if (frame_sizes.size() != n_ || total != frames.size()) {
    throw Error(ErrorCode::invalid_argument,
                "compressed column '" + std::string(name) +
                    "': " + std::to_string(frame_sizes.size()) + " frame sizes adding up to " +
                    std::to_string(total) + " bytes for " + std::to_string(n_) + " items and " +
                    std::to_string(frames.size()) + " bytes of frames");
  }
  next_column(name, dtype, item_shape).compressed_bytes = frames.size();
  add_piece(std::as_bytes(frame_sizes));
  add_piece(frames);
  return *this;
}

InsertBatch& InsertBatch::priorities(std::span<const double> values) {
  if (has_priorities_) throw Error(ErrorCode::invalid_argument, "priorities given twice");
  if (values.size() != n_) {
    throw Error(
        ErrorCode::invalid_argument,
        std::to_string(values.size()) + " priorities given for " + std::to_string(n_) + " items");
  }
  has_priorities_ = true;
  const std::size_t before = pieces_.size();
  add_piece(std::as_bytes(values));
  priority_pieces_ = pieces_.size() - before;
  return *this;
}

void InsertBatch::append_meta(std::string& out, std::string_view table,
                              std::optional<std::uint64_t> timeout_ms, std::string_view op) const {
  out.append("{\"op\":\"").append(op).append("\",\"table\":");
  append_json_string(out, table);
  out.append(",\"n\":");
  append_json_uint(out, n_);
  out.append(has_priorities_ ? ",\"priorities\":true" : ",\"priorities\":false");
  out.append(",\"timeout_ms\":");
  append_json_optional_uint(out, timeout_ms);
  out.append(",\"columns\":");
  append_columns_json(out);
  out.push_back('}');
}

void InsertBatch::append_columns_json(std::string& out) const {
  out.push_back('[');
  for (std::size_t i = 0; i < used_columns_; ++i) {
    const Column& column = columns_[i];
    if (i > 0) out.push_back(',');
    out.append("{\"name\":");
    append_json_string(out, column.name);
    out.append(",\"dtype\":\"").append(dtype_name(column.dtype)).append("\",\"shape\":[");
    append_json_uint(out, n_);
    for (const auto dim : column.item_shape) {
      out.push_back(',');
      append_json_uint(out, dim);
    }
    out.push_back(']');
    if (column.compressed_bytes) {
      out.append(",\"compression\":\"zstd\",\"bytes\":");
      append_json_uint(out, *column.compressed_bytes);
    }
    out.push_back('}');
  }
  out.push_back(']');
}

}  // namespace replayd::client
