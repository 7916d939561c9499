#include "replayd_client/wire/reply_decoder.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "replayd_client/pixels/pixel_frame_decoding.h"
#include "replayd_client/wire/wire_frame_codec.h"

namespace replayd::client {
namespace json = boost::json;
namespace {

[[noreturn]] void bad_reply(const std::string& why) {
  throw Error(ErrorCode::bad_reply, "reply does not follow the protocol: " + why);
}

}  // namespace

std::uint64_t reply_uint(const json::object& meta, std::string_view key) {
  const json::value* value = meta.if_contains(key);
  if (value && value->is_uint64()) return value->get_uint64();
  if (value && value->is_int64() && value->get_int64() >= 0) {
    return static_cast<std::uint64_t>(value->get_int64());
  }
  bad_reply("expected a non-negative integer '" + std::string(key) + "' in " +
            json::serialize(meta));
}

namespace {

const json::string& string_at(const json::object& meta, std::string_view key) {
  const json::value* value = meta.if_contains(key);
  if (!value || !value->is_string()) bad_reply("expected a string '" + std::string(key) + "'");
  return value->get_string();
}

ColumnSpec column_spec(const json::value& value, std::uint64_t n) {
  if (!value.is_object()) bad_reply("a sample column is not an object");
  const json::object& column = value.get_object();
  ColumnSpec spec;
  spec.name = std::string(string_at(column, "name"));
  const auto dtype = parse_dtype(string_at(column, "dtype"));
  if (!dtype) bad_reply("column '" + spec.name + "' has an unknown dtype");
  spec.dtype = *dtype;
  const json::value* shape = column.if_contains("shape");
  if (!shape || !shape->is_array() || shape->get_array().empty()) {
    bad_reply("column '" + spec.name + "' has no shape");
  }
  std::uint64_t items = 1;
  for (const auto& dim : shape->get_array()) {
    if (!dim.is_uint64() && !(dim.is_int64() && dim.get_int64() >= 0)) {
      bad_reply("column '" + spec.name + "' has a bad dimension");
    }
    spec.shape.push_back(dim.to_number<std::uint64_t>());
    items *= spec.shape.back();
  }
  if (spec.shape.front() != n) bad_reply("column '" + spec.name + "' does not have n rows");
  spec.offset = reply_uint(column, "offset");
  spec.bytes = items * dtype_bytes(spec.dtype);
  if (spec.offset % kColumnAlignment != 0) bad_reply("column '" + spec.name + "' is misaligned");
  return spec;
}

}  // namespace

std::shared_ptr<SampleLayout> column_layout(const json::object& meta,
                                            std::span<const LeadingColumn> leading,
                                            std::string_view what, std::size_t frame_columns) {
  auto layout = std::make_shared<SampleLayout>();
  layout->n = reply_uint(meta, "n");
  const json::value* columns = meta.if_contains("columns");
  if (!columns || !columns->is_array())
    bad_reply("a " + std::string(what) + " reply has no columns");
  const json::array& list = columns->get_array();
  if (list.size() < frame_columns) bad_reply("a " + std::string(what) + " reply lacks its frames");
  for (std::size_t i = 0; i + frame_columns < list.size(); ++i) {
    layout->columns.push_back(column_spec(list[i], layout->n));
    const ColumnSpec& spec = layout->columns.back();
    layout->payload_bytes = std::max(layout->payload_bytes, spec.offset + spec.bytes);
  }
  if (layout->columns.size() < leading.size()) {
    bad_reply("a " + std::string(what) + " reply lacks its leading columns");
  }
  for (std::size_t i = 0; i < leading.size(); ++i) {
    const ColumnSpec& spec = layout->columns[i];
    if (spec.name != leading[i].name || spec.dtype != leading[i].dtype ||
        (leading[i].rows_only && spec.shape.size() != 1)) {
      bad_reply(std::string(what) + " column " + std::to_string(i) + " should be " +
                std::string(leading[i].name));
    }
  }
  return layout;
}

void check_layout_fits(const SampleLayout& layout, const Reply& reply) {
  if (layout.payload_bytes > reply.payload.size()) {
    bad_reply("columns need " + std::to_string(layout.payload_bytes) +
              " payload bytes, the reply has " + std::to_string(reply.payload.size()));
  }
}

namespace {

// A sample reply's layout: the four per-draw columns first; with "nstep", discount and
// steps last.
std::shared_ptr<const SampleLayout> layout_of(const json::object& meta,
                                              std::size_t frame_columns = 0) {
  constexpr std::array<LeadingColumn, 4> kLeading{{{"key", DType::uint64},
                                                   {"probability", DType::float64},
                                                   {"weight", DType::float64},
                                                   {"times_sampled", DType::uint32}}};
  auto layout = column_layout(meta, kLeading, "sample", frame_columns);
  if (meta.if_contains("nstep")) {
    layout->nstep = reply_uint(meta, "nstep");
    const std::size_t count = layout->columns.size();
    if (count < kLeading.size() + 2 || layout->columns[count - 2].name != "discount" ||
        layout->columns[count - 2].dtype != DType::float64 ||
        layout->columns[count - 1].name != "steps" ||
        layout->columns[count - 1].dtype != DType::uint32) {
      bad_reply("an n-step sample reply should end with the columns discount and steps");
    }
  }
  if (const json::value* versions = meta.if_contains("versions");
      versions && versions->is_bool() && versions->get_bool()) {
    layout->versions = true;
    const std::size_t count = layout->columns.size();
    if (count < kLeading.size() + 1 || layout->columns[count - 1].name != "version" ||
        layout->columns[count - 1].dtype != DType::uint64) {
      bad_reply("a sample reply with versions should end with the column version");
    }
  }
  return layout;
}

double number_at(const json::object& meta, std::string_view key) {
  const json::value* value = meta.if_contains(key);
  if (!value || !value->is_number()) bad_reply("expected a number '" + std::string(key) + "'");
  return value->to_number<double>();
}

TableState state_of(const json::object& state) {
  return {reply_uint(state, "size"), number_at(state, "mass"), number_at(state, "min_mass")};
}

}  // namespace

std::optional<TableState> reply_state(const json::object& meta) {
  const json::value* state = meta.if_contains("state");
  if (!state) return std::nullopt;
  if (!state->is_object()) bad_reply("a sample reply's state is not an object");
  return state_of(state->get_object());
}

ReplyDecoder::ReplyDecoder() : arena_(arena_bytes_.data(), arena_bytes_.size()) {}

const json::object& ReplyDecoder::parse_text(std::string_view text) {
  parsed_.reset();
  arena_.release();  // every allocation of the previous reply's metadata is gone now
  std::error_code ec;
  parsed_.emplace(json::parse(text, ec, json::storage_ptr(&arena_)));
  if (ec || !parsed_->is_object()) bad_reply("reply metadata is not a JSON object");
  return parsed_->get_object();
}

const json::object& ReplyDecoder::parse(const Reply& reply) {
  const json::object& meta = parse_text(reply.meta);
  if (const json::value* error = meta.if_contains("error")) {
    const json::object* details = error->if_object();
    const json::value* code = details ? details->if_contains("code") : nullptr;
    const json::value* message = details ? details->if_contains("message") : nullptr;
    if (!code || !code->is_string() || !message || !message->is_string()) {
      bad_reply("an error reply without code and message");
    }
    throw Error(parse_error_code(code->get_string()), std::string(message->get_string()));
  }
  return meta;
}

std::pair<std::shared_ptr<const SampleLayout>, std::optional<TableState>> ReplyDecoder::sample_meta(
    const Reply& reply) {
  // The server appends the state last: {"n":..,"columns":[..],"state":{..}} (an n-step
  // reply has "nstep":k before it). Any other spelling still decodes, through a full parse.
  constexpr std::string_view kStateKey = ",\"state\":";
  const std::string_view meta = reply.meta;
  const std::size_t state_at = meta.rfind(kStateKey);
  const std::string_view columns_text = meta.substr(0, state_at);
  std::shared_ptr<const SampleLayout> layout;
  std::optional<TableState> state;
  for (const auto& cached : layouts_) {
    if (!cached.layout || cached.meta != columns_text) continue;
    if (state_at == std::string_view::npos) {
      layout = cached.layout;
      break;
    }
    if (meta.back() == '}') {
      const std::size_t begin = state_at + kStateKey.size();
      state = state_of(parse_text(meta.substr(begin, meta.size() - 1 - begin)));
      layout = cached.layout;
      break;
    }
  }
  if (!layout) {
    const json::object& parsed = parse(reply);
    layout = layout_of(parsed);
    state = reply_state(parsed);
    CachedLayout& slot = layouts_[next_layout_];
    next_layout_ = (next_layout_ + 1) % kCachedLayouts;
    slot.meta = columns_text;
    slot.layout = layout;
  }
  check_layout_fits(*layout, reply);
  return {std::move(layout), state};
}

void decode_empty(Reply&& reply, ReplyDecoder& decoder) {
  decoder.parse(reply);
}

Reply decode_raw(Reply&& reply, ReplyDecoder& decoder) {
  decoder.parse(reply);
  return std::move(reply);
}

json::object decode_object(Reply&& reply, ReplyDecoder& decoder) {
  // Copied out of the decoder's arena into the default allocator.
  return json::object(decoder.parse(reply), json::storage_ptr());
}

json::object decode_table_info(Reply&& reply, ReplyDecoder& decoder) {
  const json::object& meta = decoder.parse(reply);
  const json::value* table = meta.if_contains("table");
  if (!table || !table->is_object()) bad_reply("expected a 'table' object");
  return json::object(table->get_object(), json::storage_ptr());
}

json::array decode_tables(Reply&& reply, ReplyDecoder& decoder) {
  const json::object& meta = decoder.parse(reply);
  const json::value* tables = meta.if_contains("tables");
  if (!tables || !tables->is_array()) bad_reply("expected a 'tables' array");
  return json::array(tables->get_array(), json::storage_ptr());
}

ServerHello decode_hello(Reply&& reply, ReplyDecoder& decoder) {
  const json::object& meta = decoder.parse(reply);
  ServerHello hello;
  hello.protocol = reply_uint(meta, "protocol");
  hello.server = std::string(string_at(meta, "server"));
  if (const json::value* tables = meta.if_contains("tables"); tables && tables->is_array()) {
    for (const auto& name : tables->get_array()) {
      if (name.is_string()) hello.tables.emplace_back(name.get_string());
    }
  }
  if (const json::value* limits = meta.if_contains("limits"); limits && limits->is_object()) {
    hello.limits = json::object(limits->get_object(), json::storage_ptr());
  }
  hello.shm_reason = "not asked for";
  if (const json::value* shm = meta.if_contains("shm"); shm && shm->is_object()) {
    const json::value* offered = shm->get_object().if_contains("offered");
    hello.shm_offered = offered != nullptr && offered->is_bool() && offered->get_bool();
    const json::value* reason = shm->get_object().if_contains("reason");
    hello.shm_reason = reason != nullptr && reason->is_string() ? std::string(reason->get_string())
                                                                : std::string();
  }
  return hello;
}

Keys decode_keys(Reply&& reply, ReplyDecoder& decoder) {
  const std::uint64_t n = reply_uint(decoder.parse(reply), "n");
  if (reply.payload.size() != n * sizeof(std::uint64_t)) {
    bad_reply("an insert reply of " + std::to_string(n) + " keys carries " +
              std::to_string(reply.payload.size()) + " payload bytes");
  }
  return Keys(std::move(reply.payload), n);
}

SampleBatch decode_sample(Reply&& reply, ReplyDecoder& decoder) {
  if (reply.meta.find("\"frames\":") != std::string::npos) {
    // Frame fields: their columns differ from reply to reply, so no layout cache.
    const json::object& meta = decoder.parse(reply);
    const FrameColumns frames = frame_columns_of(meta, reply.payload.size());
    auto layout = layout_of(meta, frames.column_count);
    const std::optional<TableState> state = reply_state(meta);
    check_layout_fits(*layout, reply);
    if (frames.specs.empty())
      return SampleBatch(std::move(layout), std::move(reply.payload), state);
    if (!layout->nstep) bad_reply("frame fields in a sample reply without nstep");
    const std::size_t count = layout->columns.size();
    const auto& keys = layout->columns[0];
    const auto& steps = layout->columns[count - 1];
    auto decoded = decode_nstep_frames(frames, reply.payload,
                                       {reply.payload.as<std::uint64_t>(keys.offset), layout->n},
                                       {reply.payload.as<std::uint32_t>(steps.offset), layout->n});
    return SampleBatch(std::move(layout), std::move(reply.payload), state, std::move(decoded));
  }
  auto [layout, state] = decoder.sample_meta(reply);
  return SampleBatch(std::move(layout), std::move(reply.payload), state);
}

UpdateResult decode_update(Reply&& reply, ReplyDecoder& decoder) {
  const json::object& meta = decoder.parse(reply);
  return {reply_uint(meta, "applied"), reply_uint(meta, "stale")};
}

DeleteResult decode_delete(Reply&& reply, ReplyDecoder& decoder) {
  const json::object& meta = decoder.parse(reply);
  return {reply_uint(meta, "deleted"), reply_uint(meta, "stale")};
}

}  // namespace replayd::client
