// The Client's shared-memory calls (client.h, docs/SHM.md): map_table, sample_keys_async,
// map_staging, insert_staged_async.
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <charconv>
#include <cmath>
#include <string_view>

#include "replayd_client/client.h"
#include "replayd_client/wire/json_text.h"
#include "replayd_client/wire/request_meta.h"

namespace replayd::client {
namespace {

// The reply's "region", read off the metadata text, so that a keys reply costs no JSON
// parse beyond decode_sample's cached layout: `,"region":` cannot occur inside a JSON string
// (a quote there follows a backslash). A full parse when the text is spelled otherwise.
std::uint64_t region_of(const Reply& reply, ReplyDecoder& decoder) {
  constexpr std::string_view kKey = ",\"region\":";
  const std::string_view meta = reply.meta;
  if (const std::size_t at = meta.find(kKey); at != std::string_view::npos) {
    const char* begin = meta.data() + at + kKey.size();
    const char* end = meta.data() + meta.size();
    std::uint64_t region = 0;
    const auto [stop, error] = std::from_chars(begin, end, region);
    if (error == std::errc() && stop != end && (*stop == ',' || *stop == '}')) return region;
  }
  return reply_uint(decoder.parse(reply), "region");
}

DrawnKeys decode_drawn_keys(Reply&& reply, ReplyDecoder& decoder) {
  const std::uint64_t region = region_of(reply, decoder);
  return {decode_sample(std::move(reply), decoder), region};
}

}  // namespace

std::pair<boost::json::object, int> Client::call_with_descriptor(std::string_view meta) {
  std::lock_guard lock(map_mutex_);
  Reply reply = connection_->call<Reply, decode_raw>(meta, {}).get();
  const int fd = connection_->take_descriptor();
  boost::system::error_code ec;
  boost::json::value parsed = boost::json::parse(reply.meta, ec);
  if (ec || !parsed.is_object()) {
    if (fd >= 0) ::close(fd);
    throw Error(ErrorCode::bad_reply, "a map reply whose metadata is not a JSON object");
  }
  return {std::move(parsed.get_object()), fd};
}

std::unique_ptr<TableMapping> Client::map_table(std::string_view table) {
  std::string meta = "{\"op\":\"map_table\",\"table\":";
  append_json_string(meta, table);
  meta.push_back('}');
  auto [reply, fd] = call_with_descriptor(meta);
  return std::make_unique<TableMapping>(reply, fd);
}

std::future<DrawnKeys> Client::sample_keys_async(std::string_view table, std::uint64_t n,
                                                 SampleOptions options) {
  if (!std::isfinite(options.beta)) {
    throw Error(ErrorCode::invalid_argument, "sample: beta must be finite and >= 0");
  }
  std::string& meta = sample_request(table, n, options.beta, options.timeout_ms);
  meta.append(",\"rows\":\"keys\"}");
  return connection_->call<DrawnKeys, decode_drawn_keys>(meta, {});
}

std::unique_ptr<StagingArena> Client::map_staging(std::uint64_t bytes) {
  std::string meta = "{\"op\":\"map_staging\",\"bytes\":";
  append_json_uint(meta, bytes);
  meta.push_back('}');
  auto [reply, fd] = call_with_descriptor(meta);
  return std::make_unique<StagingArena>(reply, fd);
}

std::future<Keys> Client::insert_staged_async(std::string_view table, const InsertBatch& batch,
                                              const StagedInsert& staged, InsertOptions options) {
  if (staged.arena == nullptr) {
    throw Error(ErrorCode::invalid_argument, "insert_staged: no staging arena");
  }
  std::string& meta = scratch_meta();
  batch.append_meta(meta, table, options.timeout_ms);
  meta.pop_back();  // the closing brace: the staged member goes in
  append_staged_member(meta, staged.arena->id(), staged.offset,
                       staged.rows == 0 ? batch.size() : staged.rows);
  meta.push_back('}');
  return connection_->call<Keys, decode_keys>(meta, {});
}

}  // namespace replayd::client
