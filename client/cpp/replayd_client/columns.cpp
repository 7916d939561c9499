#include "replayd_client/columns.h"

#include <array>

#include "replayd_client/error.h"
#include "replayd_client/frame_codec.h"
#include "replayd_client/json_text.h"

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
  if (used_columns_ == columns_.size()) columns_.emplace_back();
  Column& column = columns_[used_columns_++];
  column.name.assign(name);
  column.dtype = dtype;
  column.item_shape.assign(item_shape.begin(), item_shape.end());
  add_piece(data);
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
  out.append(",\"columns\":[");
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
    out.append("]}");
  }
  out.append("]}");
}

}  // namespace replayd::client
