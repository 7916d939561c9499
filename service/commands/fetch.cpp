// `fetch` (docs/PROTOCOL.md, "Published values"): a value's current version when it is newer
// than the caller's, else a wait on the server, in the value's queue, woken by each commit
// (service/values/value_store.h), until a newer one is committed or timeout_ms passes. The
// reply's payload is the committed version itself (its parts, pinned by the reply until
// written: no copy); a wait that ends without a newer version replies without a value. With
// "shared_memory": true, a connection offered the plane gets the version's sealed memfd
// (read-only) instead of its bytes, when the value lives in one.
#include "service/commands/handlers.h"
#include "service/shm/connection_plane.h"
#include "service/shm/memfd.h"
#include "service/values/value_store.h"
#include "service/waiting/admission.h"

namespace replayd::service::commands {
namespace {

std::string name_json(const std::string& name) {
  return boost::json::serialize(boost::json::string(name));
}

Reply unchanged(const Call& call, const PublishedValue& value) {
  const std::string version = value.current ? std::to_string(value.version()) : "null";
  return reply_with(call, "{\"name\":" + name_json(value.name) + ",\"version\":" + version +
                              ",\"changed\":false}");
}

}  // namespace

asio::awaitable<Result<Reply>> fetch(Call& call) {
  REPLAYD_CO_ASSIGN_OR_RETURN(std::string name, call.args.string("name"));
  std::optional<std::uint64_t> newer_than;
  if (const auto* given = call.args.value("newer_than"); given && !given->is_null()) {
    REPLAYD_CO_ASSIGN_OR_RETURN(newer_than, call.args.optional_uint("newer_than"));
  }
  REPLAYD_CO_ASSIGN_OR_RETURN(bool wants_shared, call.args.boolean_or("shared_memory", false));
  REPLAYD_CO_ASSIGN_OR_RETURN(std::shared_ptr<PublishedValue> value,
                              call.service.values.entry(name));
  const auto is_newer = [&value, &newer_than] {
    return value->current && (!newer_than || value->version() > *newer_than);
  };
  Status admitted =
      co_await admit_when(call, value->fetchers, is_newer,
                          "no version newer than the caller's was published", Order::any);
  if (!admitted) {
    // The wait's end is an answer ("nothing newer"), not an error: no value bytes move.
    if (admitted.error().code == ErrorCode::would_block) {
      call.service.metrics.value_fetched(false, 0);
      co_return unchanged(call, *value);
    }
    co_return admitted.error();
  }
  const std::shared_ptr<const ValueVersion> version = value->current;
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - version->published_at);
  std::string meta =
      "{\"name\":" + name_json(value->name) + ",\"version\":" + std::to_string(version->version) +
      ",\"bytes\":" + std::to_string(version->bytes) + ",\"arrays\":" + version->arrays_json +
      ",\"published_ms_ago\":" + std::to_string(age.count());
  if (wants_shared && version->payload.memfd.valid() && call.plane != nullptr &&
      call.plane->access().offered) {
    // The block itself, read-only: the fetcher maps it and copies (or views) the arrays.
    REPLAYD_CO_ASSIGN_OR_RETURN(auto hold, call.plane->hold_descriptor_reply());
    REPLAYD_CO_ASSIGN_OR_RETURN(UniqueFd read_only,
                                shm::reopen_read_only(version->payload.memfd.get()));
    Reply reply = reply_with(call, meta + ",\"shared_memory\":true,\"descriptors\":1}");
    reply.descriptors.push_back(std::move(read_only));
    reply.descriptor_hold = std::move(hold);
    call.service.metrics.value_fetched(true, version->bytes, age, /*shared=*/true);
    co_return reply;
  }
  Reply reply = reply_with(call, meta + "}");
  for (std::span<const std::byte> piece : version->payload.pieces())
    reply.pieces.push_back(piece);
  if (!reply.pieces.empty()) {
    reply.pinned = version;
    encode_header(FrameHeader{FrameKind::reply, call.request_id,
                              static_cast<std::uint32_t>(reply.meta.size()), version->bytes},
                  reply.header);
  }
  call.service.metrics.value_fetched(true, version->bytes, age);
  co_return reply;
}

}  // namespace replayd::service::commands
