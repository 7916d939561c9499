#include "replayd_client/values/published_values.h"

#include <algorithm>
#include <array>
#include <boost/json/parse.hpp>
#include <future>

#include "replayd_client/error.h"
#include "replayd_client/wire/json_text.h"

namespace replayd::client {
namespace {

namespace json = boost::json;

constexpr std::array<std::byte, 8> kZeros{};

std::uint64_t padded(std::uint64_t bytes) {
  return (bytes + 7) / 8 * 8;
}

json::object meta_of(const Reply& reply) {
  std::error_code ec;
  json::value parsed = json::parse(reply.meta, ec);
  if (ec || !parsed.is_object()) throw Error(ErrorCode::bad_reply, "reply metadata is not JSON");
  return std::move(parsed.as_object());
}

std::uint64_t uint_of(const json::object& meta, std::string_view key) {
  const json::value* value = meta.if_contains(key);
  if (!value || !value->is_number())
    throw Error(ErrorCode::bad_reply, "reply without '" + std::string(key) + "'");
  return value->to_number<std::uint64_t>();
}

// The publish_begin request of `arrays`.
std::string begin_request(std::string_view name, std::span<const ValueArrayIn> arrays,
                          const PublishOptions& options) {
  std::string meta = "{\"op\":\"publish_begin\",\"name\":";
  append_json_string(meta, name);
  meta += ",\"version\":";
  append_json_optional_uint(meta, options.version);
  meta += ",\"arrays\":[";
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const ValueArrayIn& array = arrays[i];
    std::uint64_t bytes = dtype_bytes(array.dtype);
    for (std::uint64_t dim : array.shape)
      bytes *= dim;
    if (bytes != array.bytes.size()) {
      throw Error(ErrorCode::invalid_argument,
                  "publish: array '" + array.name + "' has " + std::to_string(array.bytes.size()) +
                      " bytes, its dtype and shape say " + std::to_string(bytes));
    }
    if (i) meta += ',';
    meta += "{\"name\":";
    append_json_string(meta, array.name);
    meta += ",\"dtype\":\"" + std::string(dtype_name(array.dtype)) + "\",\"shape\":[";
    for (std::size_t d = 0; d < array.shape.size(); ++d) {
      if (d) meta += ',';
      append_json_uint(meta, array.shape[d]);
    }
    meta += "]}";
  }
  return meta + "]}";
}

}  // namespace

std::uint64_t publish(Client& client, std::string_view name, std::span<const ValueArrayIn> arrays,
                      PublishOptions options) {
  if (options.part_bytes == 0 || options.part_bytes % 8 != 0) {
    throw Error(ErrorCode::invalid_argument,
                "publish: part_bytes must be a positive multiple of 8");
  }
  const json::object begun =
      meta_of(client.request_async(begin_request(name, arrays, options)).get());
  const std::uint64_t upload = uint_of(begun, "upload");
  // The value's bytes in order, padding included, cut into parts of part_bytes.
  std::vector<PayloadPiece> stream;
  for (const ValueArrayIn& array : arrays) {
    if (!array.bytes.empty()) stream.push_back(array.bytes);
    const std::uint64_t pad = padded(array.bytes.size()) - array.bytes.size();
    if (pad) stream.emplace_back(kZeros.data(), pad);
  }
  std::vector<std::future<Reply>> replies;
  std::vector<PayloadPiece> part;
  std::uint64_t offset = 0;
  std::uint64_t in_part = 0;
  auto send_part = [&] {
    std::string meta = "{\"op\":\"publish_part\",\"upload\":" + std::to_string(upload) +
                       ",\"offset\":" + std::to_string(offset) + "}";
    replies.push_back(client.request_async(meta, part));
    offset += in_part;
    part.clear();
    in_part = 0;
  };
  for (PayloadPiece piece : stream) {
    while (!piece.empty()) {
      const std::uint64_t take =
          std::min<std::uint64_t>(piece.size(), options.part_bytes - in_part);
      part.push_back(piece.first(take));
      in_part += take;
      piece = piece.subspan(take);
      if (in_part == options.part_bytes) send_part();
    }
  }
  if (in_part) send_part();
  std::future<Reply> committed =
      client.request_async("{\"op\":\"publish_commit\",\"upload\":" + std::to_string(upload) + "}");
  for (auto& reply : replies)
    reply.get();  // a part's error (the commit's then says why too)
  return uint_of(meta_of(committed.get()), "version");
}

const FetchedValue::Array& FetchedValue::array(std::string_view name) const {
  for (const Array& array : arrays_) {
    if (array.name == name) return array;
  }
  throw Error(ErrorCode::invalid_argument, "the value has no array '" + std::string(name) + "'");
}

FetchedValue fetch(Client& client, std::string_view name, std::optional<std::uint64_t> newer_than,
                   std::optional<std::uint64_t> timeout_ms) {
  std::string meta = "{\"op\":\"fetch\",\"name\":";
  append_json_string(meta, name);
  meta += ",\"newer_than\":";
  append_json_optional_uint(meta, newer_than);
  meta += ",\"timeout_ms\":";
  append_json_optional_uint(meta, timeout_ms);
  meta += '}';
  Reply reply = client.request_async(meta).get();
  const json::object parsed = meta_of(reply);
  const json::value* version = parsed.if_contains("version");
  const std::optional<std::uint64_t> current =
      version && version->is_number() ? std::optional(version->to_number<std::uint64_t>())
                                      : std::nullopt;
  if (const json::value* changed = parsed.if_contains("changed");
      changed && changed->is_bool() && !changed->get_bool()) {
    return FetchedValue(current, false, {}, Buffer());
  }
  const json::value* listed = parsed.if_contains("arrays");
  if (!listed || !listed->is_array())
    throw Error(ErrorCode::bad_reply, "fetch reply without arrays");
  std::vector<FetchedValue::Array> arrays;
  for (const json::value& item : listed->as_array()) {
    const json::object& entry = item.as_object();
    FetchedValue::Array array;
    array.name = std::string(entry.at("name").as_string());
    const auto dtype = parse_dtype(std::string_view(entry.at("dtype").as_string()));
    if (!dtype) throw Error(ErrorCode::bad_reply, "fetch reply with an unknown dtype");
    array.dtype = *dtype;
    std::uint64_t bytes = dtype_bytes(*dtype);
    for (const json::value& dim : entry.at("shape").as_array()) {
      array.shape.push_back(dim.to_number<std::uint64_t>());
      bytes *= array.shape.back();
    }
    const std::uint64_t offset = uint_of(entry, "offset");
    if (offset > reply.payload.size() || bytes > reply.payload.size() - offset) {
      throw Error(ErrorCode::bad_reply,
                  "fetch reply: array '" + array.name + "' lies beyond the payload");
    }
    array.bytes = std::span<const std::byte>(reply.payload.data() + offset, bytes);
    arrays.push_back(std::move(array));
  }
  return FetchedValue(current, true, std::move(arrays), std::move(reply.payload));
}

}  // namespace replayd::client
