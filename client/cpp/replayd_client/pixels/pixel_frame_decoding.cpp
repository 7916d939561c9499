#include "replayd_client/pixels/pixel_frame_decoding.h"

#include <algorithm>
#include <boost/json/array.hpp>
#include <cstring>
#include <functional>

#include "replayd_client/error.h"
#include "replayd_client/wire/reply_decoder.h"
#include "replayd_client/pixels/zstd_codec.h"

namespace replayd::client {
namespace json = boost::json;
namespace {

[[noreturn]] void bad_reply(const std::string& why) {
  throw Error(ErrorCode::bad_reply, "reply does not follow the protocol: " + why);
}

std::string string_of(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  if (!value || !value->is_string())
    bad_reply("frame field entry without '" + std::string(key) + "'");
  return std::string(value->get_string());
}

FrameFieldSpec spec_of(const json::value& value) {
  const json::object* entry = value.if_object();
  if (!entry) bad_reply("a 'frames' entry is not an object");
  FrameFieldSpec spec;
  spec.name = string_of(*entry, "name");
  const auto dtype = parse_dtype(string_of(*entry, "dtype"));
  if (!dtype) bad_reply("frame field '" + spec.name + "' of unknown dtype");
  spec.dtype = *dtype;
  const json::value* shape = entry->if_contains("shape");
  if (!shape || !shape->is_array()) bad_reply("frame field '" + spec.name + "' without shape");
  std::uint64_t values = 1;
  for (const auto& dim : shape->get_array()) {
    if (!dim.is_uint64() && !(dim.is_int64() && dim.get_int64() >= 0)) {
      bad_reply("frame field '" + spec.name + "' has a bad dimension");
    }
    spec.shape.push_back(dim.to_number<std::uint64_t>());
    values *= spec.shape.back();
  }
  spec.item_bytes = values * dtype_bytes(spec.dtype);
  spec.stack = reply_uint(*entry, "stack");
  if (spec.stack < 1) bad_reply("frame field '" + spec.name + "' with stack 0");
  const json::value* next_of = entry->if_contains("next_of");
  spec.next_of = next_of && next_of->is_bool() && next_of->get_bool();
  spec.zstd = string_of(*entry, "encoding") == "zstd";
  return spec;
}

FrameColumn column_of(const json::value& value, std::string_view expected_name,
                      std::uint64_t payload_bytes) {
  const json::object* column = value.if_object();
  if (!column || string_of(*column, "name") != expected_name) {
    bad_reply("expected the frame column '" + std::string(expected_name) + "'");
  }
  const auto dtype = parse_dtype(string_of(*column, "dtype"));
  const json::value* shape = column->if_contains("shape");
  if (!dtype || !shape || !shape->is_array() || shape->get_array().empty()) {
    bad_reply("frame column '" + std::string(expected_name) + "' without dtype and shape");
  }
  FrameColumn out;
  std::uint64_t values = 1;
  for (const auto& dim : shape->get_array()) {
    if (!dim.is_uint64() && !(dim.is_int64() && dim.get_int64() >= 0)) {
      bad_reply("frame column '" + std::string(expected_name) + "' has a bad dimension");
    }
    values *= dim.to_number<std::uint64_t>();
  }
  out.rows = shape->get_array().front().to_number<std::uint64_t>();
  out.offset = reply_uint(*column, "offset");
  out.bytes = values * dtype_bytes(*dtype);
  if (out.offset + out.bytes > payload_bytes) {
    bad_reply("frame column '" + std::string(expected_name) + "' runs past the payload");
  }
  return out;
}

ZstdDecompressor& thread_decompressor() {
  thread_local ZstdDecompressor decompressor;
  return decompressor;
}

// The frames of every field; `owner(field, frame)` is the key of the draw a frame belongs to.
std::vector<DecodedFrames> decode_fields(
    const FrameColumns& columns, const Buffer& payload,
    const std::function<std::uint64_t(const FrameFieldSpec&, std::uint64_t)>& owner) {
  std::vector<DecodedFrames> out;
  std::size_t at = 0;
  for (const FrameFieldSpec& spec : columns.specs) {
    DecodedFrames decoded;
    decoded.spec = spec;
    if (!spec.zstd) {
      const FrameColumn& frames = columns.columns[at++];
      decoded.data = payload.data() + frames.offset;
      decoded.frame_count = frames.rows;
      out.push_back(std::move(decoded));
      continue;
    }
    const FrameColumn& sizes_column = columns.columns[at++];
    const FrameColumn& blob = columns.columns[at++];
    const auto* sizes = payload.as<std::uint32_t>(sizes_column.offset);
    const std::uint64_t count = sizes_column.rows;
    std::uint64_t total = 0;
    for (std::uint64_t i = 0; i < count; ++i)
      total += sizes[i];
    if (total != blob.bytes) {
      bad_reply("field '" + spec.name + "': frame sizes do not add up to its bytes");
    }
    decoded.decompressed = Buffer(count * spec.item_bytes);
    decoded.data = decoded.decompressed.data();
    decoded.frame_count = count;
    const std::byte* frame = payload.data() + blob.offset;
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::span<std::byte> target(decoded.decompressed.data() + i * spec.item_bytes,
                                        spec.item_bytes);
      if (sizes[i] == 0) {  // a frame of zeros (padding)
        std::memset(target.data(), 0, target.size());
        continue;
      }
      const std::string failure = thread_decompressor().decompress({frame, sizes[i]}, target);
      if (!failure.empty()) {
        throw Error(ErrorCode::data_loss,
                    "table '" + columns.table + "': a stored value of field '" + spec.name +
                        "' (in the draw with key " + std::to_string(owner(spec, i)) +
                        ") is corrupt and was not decoded: " + failure);
      }
      frame += sizes[i];
    }
    out.push_back(std::move(decoded));
  }
  return out;
}

}  // namespace

FrameColumns frame_columns_of(const json::object& meta, std::uint64_t payload_bytes) {
  FrameColumns out;
  const json::value* entries = meta.if_contains("frames");
  if (!entries) return out;
  if (!entries->is_array()) bad_reply("reply 'frames' is not a list");
  if (const json::value* table = meta.if_contains("table"); table && table->is_string()) {
    out.table = std::string(table->get_string());
  }
  for (const auto& entry : entries->get_array()) {
    out.specs.push_back(spec_of(entry));
    out.column_count += out.specs.back().zstd ? 2 : 1;
  }
  const json::value* columns = meta.if_contains("columns");
  if (!columns || !columns->is_array() || columns->get_array().size() < out.column_count) {
    bad_reply("reply lists fewer columns than its frame fields need");
  }
  const json::array& list = columns->get_array();
  std::size_t at = list.size() - out.column_count;
  for (const FrameFieldSpec& spec : out.specs) {
    if (spec.zstd) {
      out.columns.push_back(column_of(list[at++], spec.name + ".sizes", payload_bytes));
      out.columns.push_back(column_of(list[at++], spec.name + ".zstd", payload_bytes));
      if (out.columns[out.columns.size() - 2].offset % alignof(std::uint32_t) != 0) {
        bad_reply("frame column '" + spec.name + ".sizes' is misaligned");
      }
    } else {
      out.columns.push_back(column_of(list[at++], spec.name + ".frames", payload_bytes));
    }
  }
  return out;
}

DecodedFrameFields decode_nstep_frames(const FrameColumns& columns, const Buffer& payload,
                                       std::span<const std::uint64_t> keys,
                                       std::span<const std::uint32_t> steps) {
  // Per field: where each draw's frames start and how far its next stack is shifted.
  std::vector<std::vector<std::uint64_t>> starts(columns.specs.size());
  std::vector<std::vector<std::uint64_t>> shifts(columns.specs.size());
  for (std::size_t f = 0; f < columns.specs.size(); ++f) {
    const FrameFieldSpec& spec = columns.specs[f];
    std::uint64_t at = 0;
    for (const std::uint32_t h : steps) {
      const std::uint64_t shift = spec.next_of ? std::min<std::uint64_t>(h, spec.stack) : 0;
      starts[f].push_back(at);
      shifts[f].push_back(shift);
      at += spec.stack + shift;
    }
  }
  auto owner = [&](const FrameFieldSpec& spec, std::uint64_t frame) -> std::uint64_t {
    const std::size_t f = static_cast<std::size_t>(&spec - columns.specs.data());
    const auto& s = starts[f];
    const auto after = std::upper_bound(s.begin(), s.end(), frame);
    const auto draw = static_cast<std::size_t>(after - s.begin()) - 1;
    return draw < keys.size() ? keys[draw] : 0;
  };
  auto fields =
      std::make_shared<std::vector<DecodedFrames>>(decode_fields(columns, payload, owner));
  for (std::size_t f = 0; f < fields->size(); ++f) {
    DecodedFrames& decoded = (*fields)[f];
    const std::uint64_t expected =
        starts[f].empty() ? 0 : starts[f].back() + decoded.spec.stack + shifts[f].back();
    if (decoded.frame_count != expected) {
      bad_reply("field '" + decoded.spec.name + "': " + std::to_string(decoded.frame_count) +
                " frames where the draws need " + std::to_string(expected));
    }
    decoded.uniform = std::all_of(shifts[f].begin(), shifts[f].end(),
                                  [&](std::uint64_t s) { return s == shifts[f].front(); });
    decoded.starts = std::move(starts[f]);
    decoded.shifts = std::move(shifts[f]);
  }
  return fields;
}

DecodedFrameFields decode_sequence_frames(const FrameColumns& columns, const Buffer& payload,
                                          std::span<const std::uint64_t> keys,
                                          std::uint64_t steps) {
  auto owner = [&](const FrameFieldSpec& spec, std::uint64_t frame) -> std::uint64_t {
    const std::uint64_t draw = frame / (steps + spec.stack - 1);
    return draw < keys.size() ? keys[draw] : 0;
  };
  auto fields =
      std::make_shared<std::vector<DecodedFrames>>(decode_fields(columns, payload, owner));
  for (DecodedFrames& decoded : *fields) {
    const std::uint64_t expected = keys.size() * (steps + decoded.spec.stack - 1);
    if (decoded.frame_count != expected) {
      bad_reply("field '" + decoded.spec.name + "': " + std::to_string(decoded.frame_count) +
                " frames where " + std::to_string(keys.size()) + " sequences need " +
                std::to_string(expected));
    }
    decoded.steps = steps;
  }
  return fields;
}

}  // namespace replayd::client
