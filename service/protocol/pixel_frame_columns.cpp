#include "service/protocol/pixel_frame_columns.h"

#include <zstd.h>
#include <boost/json.hpp>
#include <cstring>

#include "core/storage/zstd_value.h"

namespace replayd::service::commands {
namespace {

bool sends_zstd(const Field& field, bool raw) {
  return field.compression == Compression::zstd && !raw;
}

// The stored value of a frame field's frame: empty for kNoFrame and for no value.
std::span<const std::byte> stored_frame(const Storage& storage, std::size_t f, std::uint32_t slot) {
  if (slot == kNoFrame) return {};
  if (const BlobColumn* blobs = storage.blobs(f)) return blobs->get(slot);
  return {storage.cell(f, slot), storage.item_bytes(f)};
}

Status decompress_into(std::span<std::byte> out, std::span<const std::byte> frame,
                       const Table& table, const Field& field, std::uint64_t key) {
  const std::size_t got = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(got) || got != out.size()) {
    return make_error(ErrorCode::invalid_argument,
                      "table '" + table.name() + "': the stored value of field '" + field.name +
                          "' of the step with key " + std::to_string(key) + " is corrupt (" +
                          (ZSTD_isError(got) ? ZSTD_getErrorName(got) : "wrong size") + ")");
  }
  return Ok{};
}

}  // namespace

std::uint64_t frame_columns_bound(const Field& field, std::uint64_t frames) {
  const std::uint64_t per_frame = field.compression == Compression::zstd
                                      ? 4 + max_zstd_frame_bytes(field.item_bytes())
                                      : field.item_bytes();
  return frames * per_frame + 16;  // + the columns' padding
}

Result<std::string> add_frame_columns(ColumnReply& reply, const Table& table,
                                      std::span<const std::vector<std::uint32_t>> frames, bool raw,
                                      bool stacked) {
  const Schema& schema = table.schema();
  const Storage& storage = table.storage();
  std::vector<ReplyColumn> columns;
  boost::json::array described;
  // Samples send every frame field as frames; read rows only the compressed ones.
  auto framed = [&](const Field& field) {
    return stacked ? field.is_frame() : field.compression != Compression::none;
  };
  for (std::size_t f = 0; f < schema.size(); ++f) {
    const Field& field = schema.field(f);
    if (!framed(field)) continue;
    const std::uint64_t count = frames[f].size();
    const bool zstd = sends_zstd(field, raw);
    boost::json::array shape;
    for (auto dim : field.shape)
      shape.push_back(dim);
    described.push_back(boost::json::object{{"name", field.name},
                                            {"dtype", dtype_name(field.dtype)},
                                            {"shape", std::move(shape)},
                                            {"stack", stacked ? field.stack : 1},
                                            {"next_of", stacked && field.next_of},
                                            {"encoding", zstd ? "zstd" : "raw"}});
    if (zstd) {
      std::uint64_t bytes = 0;
      for (auto slot : frames[f])
        bytes += stored_frame(storage, f, slot).size();
      columns.push_back({field.name + ".sizes", "uint32", {}, 4, {count}});
      columns.push_back({field.name + ".zstd", "uint8", {}, 1, {bytes}});
    } else {
      columns.push_back({field.name + ".frames",
                         std::string(dtype_name(field.dtype)),
                         {field.shape.begin(), field.shape.end()},
                         field.item_bytes(),
                         {count}});
    }
  }
  REPLAYD_ASSIGN_OR_RETURN(std::size_t column, reply.extend(std::move(columns)));
  for (std::size_t f = 0; f < schema.size(); ++f) {
    const Field& field = schema.field(f);
    if (!framed(field)) continue;
    if (sends_zstd(field, raw)) {
      auto sizes = reply.as<std::uint32_t>(column++);
      std::byte* to = reply.column(column++).data();
      for (std::size_t i = 0; i < frames[f].size(); ++i) {
        const auto frame = stored_frame(storage, f, frames[f][i]);
        sizes[i] = static_cast<std::uint32_t>(frame.size());
        if (!frame.empty()) std::memcpy(to, frame.data(), frame.size());
        to += frame.size();
      }
      continue;
    }
    const std::uint64_t bytes = field.item_bytes();
    std::byte* to = reply.column(column++).data();
    for (std::size_t i = 0; i < frames[f].size(); ++i, to += bytes) {
      const std::uint32_t slot = frames[f][i];
      const auto frame = stored_frame(storage, f, slot);
      if (frame.empty()) {
        std::memset(to, 0, bytes);
      } else if (field.compression == Compression::zstd) {
        REPLAYD_RETURN_IF_ERROR(
            decompress_into({to, bytes}, frame, table, field, storage.key(slot)));
      } else {
        std::memcpy(to, frame.data(), bytes);
      }
    }
  }
  return ",\"table\":" + boost::json::serialize(boost::json::string(table.name())) +
         ",\"frames\":" + boost::json::serialize(described);
}

Result<std::string> add_draw_frame_columns(ColumnReply& reply, const Table& table,
                                           std::span<const std::vector<std::uint32_t>> frames,
                                           bool raw) {
  if (frames.empty()) return std::string();
  return add_frame_columns(reply, table, frames, raw, true);
}

}  // namespace replayd::service::commands
