// ReplyDecoder: turns reply frames into results on a connection's reader thread. Metadata
// is parsed into a scratch arena reused for every reply, and the column layouts of recent
// sample replies are remembered by their metadata text, so a repeated sample shape costs
// no JSON parsing and no allocation beyond the reply's own buffers.
// Threading: owned and used by one reader thread only.
#pragma once

#include <array>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/value.hpp>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "replayd_client/wire/buffer.h"
#include "replayd_client/results.h"

namespace replayd::client {

class ReplyDecoder {
 public:
  ReplyDecoder();
  ReplyDecoder(const ReplyDecoder&) = delete;
  ReplyDecoder& operator=(const ReplyDecoder&) = delete;

  // The reply's metadata object, valid until the next call on this decoder. Throws Error
  // with the server's code for an error reply, Error(bad_reply) for metadata that is not a
  // JSON object. O(metadata bytes).
  const boost::json::object& parse(const Reply& reply);

  // The layout and table state of a sample reply; checks that the layout fits the payload.
  // Layouts are remembered by their metadata text without the trailing "state", so a
  // repeated shape costs a parse of the small state object only. Throws like parse(), or
  // Error(bad_reply) for a layout that breaks docs/PROTOCOL.md.
  std::pair<std::shared_ptr<const SampleLayout>, std::optional<TableState>> sample_meta(
      const Reply& reply);

 private:
  const boost::json::object& parse_text(std::string_view text);

  static constexpr std::size_t kCachedLayouts = 8;
  struct CachedLayout {
    std::string meta;
    std::shared_ptr<const SampleLayout> layout;
  };

  alignas(std::max_align_t) std::array<unsigned char, 8192> arena_bytes_;
  boost::json::monotonic_resource arena_;
  std::optional<boost::json::value> parsed_;  // allocated in arena_
  std::array<CachedLayout, kCachedLayouts> layouts_;
  std::size_t next_layout_ = 0;
};

// A non-negative integer of reply metadata; throws Error(bad_reply) naming the key.
std::uint64_t reply_uint(const boost::json::object& meta, std::string_view key);

// The reply's "state" (size, mass, min_mass of the table or window index sampled), nullopt
// when it has none; throws Error(bad_reply) for a malformed one.
std::optional<TableState> reply_state(const boost::json::object& meta);

// A column the layout of some reply must start with.
struct LeadingColumn {
  std::string_view name;
  DType dtype;
  bool rows_only = true;  // shape exactly [n]
};

// The layout of a reply whose metadata lists columns ({"n": N, "columns": [{"name",
// "dtype", "shape", "offset"}, ...]}): every shape starts with N, offsets are aligned, and
// the first columns are `leading`. The last `frame_columns` columns (frame fields, see
// frame_decoding.h) are left out. Throws Error(bad_reply) naming `what` (the operation).
std::shared_ptr<SampleLayout> column_layout(const boost::json::object& meta,
                                            std::span<const LeadingColumn> leading,
                                            std::string_view what, std::size_t frame_columns = 0);
// Throws Error(bad_reply) when the reply's payload is shorter than the layout needs.
void check_layout_fits(const SampleLayout& layout, const Reply& reply);

// Decoders, one per operation: each turns a successful reply into its result or throws.
void decode_empty(Reply&& reply, ReplyDecoder& decoder);
Reply decode_raw(Reply&& reply, ReplyDecoder& decoder);
boost::json::object decode_object(Reply&& reply, ReplyDecoder& decoder);
// The object under "table" (create_table), or the array under "tables" (list_tables).
boost::json::object decode_table_info(Reply&& reply, ReplyDecoder& decoder);
boost::json::array decode_tables(Reply&& reply, ReplyDecoder& decoder);
ServerHello decode_hello(Reply&& reply, ReplyDecoder& decoder);
Keys decode_keys(Reply&& reply, ReplyDecoder& decoder);
SampleBatch decode_sample(Reply&& reply, ReplyDecoder& decoder);
UpdateResult decode_update(Reply&& reply, ReplyDecoder& decoder);
DeleteResult decode_delete(Reply&& reply, ReplyDecoder& decoder);

}  // namespace replayd::client
