// `sample` (docs/PROTOCOL.md): n draws with the table's selector; runs once the table holds
// enough items and the rate limiter admits it, in arrival order behind the table's earlier
// samples. A reply larger than max_frame_bytes is refused
// before anything is drawn. With "nstep" it draws n-step transitions of an episodic table
// (service/commands/sample_nstep.cpp); without, so does a table with frame fields (k = 1).
// "rows": "keys" leaves the fields out (a same-host client gathers them from the shared
// column block, docs/SHM.md); "auto" does so when this connection and table allow it, and
// copies the rows otherwise; "batches": k draws up to k batches of n at once, as many as
// the rate limiter admits when the first is admitted. "versions": true adds each draw's
// policy version; "min_version" or "max_staleness" bound the draws by version
// (docs/VERSIONS.md). "into": {"arena", "offset", "bytes"} writes a plain sample's columns into a
// region of this connection's staging arena instead of the reply (docs/SHM.md, "Rows into the
// learner's arena"): a same-host learner of a table whose rows are copied (a file tier, a
// queue) then reads them from memory it maps, and they never cross the socket.
#include <cmath>
#include <optional>

#include "service/commands/handlers.h"
#include "service/protocol/json_reader.h"
#include "service/protocol/sample_reply.h"
#include "service/shm/connection_plane.h"
#include "service/shm/shared_columns.h"
#include "service/values/policy_versions.h"
#include "service/waiting/admission.h"

namespace replayd::service::commands {
namespace {

// How many batches of n, at most `wanted`, the table admits now (at least 1: the caller
// was admitted for one). O(wanted).
std::uint64_t admitted_batches(const Table& table, std::uint64_t n, std::uint64_t wanted,
                               std::uint64_t min_version) {
  std::uint64_t batches = wanted;
  while (batches > 1 && !(table.rate_limiter().check_sample_batch(batches * n).ok() &&
                          table.may_sample(batches * n, min_version))) {
    --batches;
  }
  return batches;
}

// Where a plain sample's columns go when the request names a region of this connection's
// staging arena ("into": {"arena", "offset", "bytes"}, docs/SHM.md): the region's bytes,
// kept mapped while the draws' rows are written there.
struct IntoRegion {
  shm::ArenaTarget target;
  std::uint64_t arena = 0;
  std::uint64_t offset = 0;
};

Result<std::optional<IntoRegion>> read_into(Call& call) {
  const boost::json::value* value = call.args.value("into");
  if (value == nullptr || value->is_null()) return std::optional<IntoRegion>{};
  REPLAYD_ASSIGN_OR_RETURN(JsonReader into, JsonReader::of(*value, call.args.path_of("into")));
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t arena, into.uint("arena"));
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t offset, into.uint("offset"));
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t bytes, into.uint("bytes"));
  REPLAYD_RETURN_IF_ERROR(into.finish());
  if (offset % 8 != 0) return into.error("offset", "must be a multiple of 8");
  if (call.plane == nullptr) {
    return make_error(ErrorCode::permission_denied,
                      "\"into\" needs the shared-memory data plane, which this connection "
                      "does not have");
  }
  REPLAYD_ASSIGN_OR_RETURN(shm::ArenaTarget target, call.plane->reply_target(arena));
  const std::uint64_t size = target.bytes.size();
  if (offset > size || bytes > size - offset) {
    return into.error("bytes", "a region of " + std::to_string(bytes) + " bytes from offset " +
                                   std::to_string(offset) + " ends past the arena's " +
                                   std::to_string(size) + " bytes");
  }
  target.bytes = target.bytes.subspan(offset, bytes);
  return std::optional<IntoRegion>{IntoRegion{std::move(target), arena, offset}};
}

}  // namespace

// Whether a plain sample of `table` may leave its rows to this connection's mapping: the
// plane is offered to it, the table lives in shared memory and its items do not retire
// when sampled (a client redraws rows overwritten before it copied them).
bool rows_in_shared_memory(const Call& call, const Table& table) {
  return call.plane != nullptr && call.plane->access().offered &&
         shm::shared_columns_of(table.storage().memory()) != nullptr &&
         !table.schema().has_frames() && table.config().max_times_sampled == 0;
}

// The block the fields of a keys-only sample are read from, named so that a client can
// tell it from the block of a table that replaced this one.
std::string region_meta(const Table& table) {
  return ",\"region\":" + std::to_string(table.storage().memory().id());
}

asio::awaitable<Result<Reply>> sample(Call& call) {
  Table& table = *call.table->table;
  REPLAYD_CO_ASSIGN_OR_RETURN(double beta, call.args.number_or("beta", 0.4));
  if (!std::isfinite(beta) || beta < 0)
    co_return call.args.error("beta", "must be finite and >= 0");
  REPLAYD_CO_ASSIGN_OR_RETURN(auto rows, call.args.optional_string("rows"));
  if (rows && *rows != "copy" && *rows != "keys" && *rows != "auto")
    co_return call.args.error("rows", "expected \"copy\" (the default), \"keys\" or \"auto\"");
  REPLAYD_CO_ASSIGN_OR_RETURN(auto nstep, call.args.optional_uint("nstep"));
  const bool keys_only =
      rows &&
      (*rows == "keys" || (*rows == "auto" && !nstep && rows_in_shared_memory(call, table)));
  REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t batches, call.args.uint_or("batches", 1));
  if (batches == 0) co_return call.args.error("batches", "must be >= 1");
  if (batches > call.service.limits.max_batch_items / call.n) {
    co_return make_error(
        ErrorCode::resource_exhausted,
        "batches: " + std::to_string(batches) + " batches of n = " + std::to_string(call.n) +
            " exceed max_batch_items = " + std::to_string(call.service.limits.max_batch_items));
  }
  const bool plain = !nstep && !table.schema().has_frames();
  if (!plain && (keys_only || batches != 1)) {
    co_return call.args.error(keys_only ? "rows" : "batches",
                              "needs a plain sample (no \"nstep\", a table without frame fields)");
  }
  REPLAYD_CO_ASSIGN_OR_RETURN(const bool versions, call.args.boolean_or("versions", false));
  REPLAYD_CO_ASSIGN_OR_RETURN(const VersionBound bound, VersionBound::parse(call.args, table));
  if (!plain && (versions || bound.bounded())) {
    co_return call.args.error(versions                         ? "versions"
                              : call.args.value("min_version") ? "min_version"
                                                               : "max_staleness",
                              "needs a plain sample (no \"nstep\", a table without frame "
                              "fields): n-step samples and sequences are not bounded by version");
  }
  REPLAYD_CO_ASSIGN_OR_RETURN(std::optional<IntoRegion> into, read_into(call));
  if (into && (!plain || (rows && *rows == "keys"))) {
    co_return call.args.error("into",
                              "needs a plain sample of rows (no \"nstep\", no \"rows\": "
                              "\"keys\", a table without frame fields)");
  }
  if (keys_only) into.reset();  // "auto" left the rows to the table's mapping
  if (keys_only && table.config().max_times_sampled != 0) {
    // A client redraws the rows overwritten before it copied them: that would take more
    // items out of a table whose items retire when sampled.
    co_return call.args.error("rows",
                              "\"keys\" needs a table whose items do not retire when "
                              "sampled (max_times_sampled 0)");
  }
  if (nstep) co_return co_await sample_nstep(call, *nstep, beta);
  // A table with frame fields holds steps whose transitions only n-step samples assemble.
  if (table.schema().has_frames()) co_return co_await sample_nstep(call, 1, beta);
  if (call.args.value("gamma")) co_return call.args.error("gamma", "needs \"nstep\"");
  // Steps of an episodic table are items too (no return, no discount), unless
  // max_times_sampled retires them per window: the table says, before anything waits.
  REPLAYD_CO_RETURN_IF_ERROR(table.check_plain_sample());
  const std::uint64_t most = call.n * batches;
  const std::uint64_t reply_bytes =
      (keys_only ? sample_reply_bytes(Schema(), most) : sample_reply_bytes(table, most)) +
      (versions ? most * sizeof(std::uint64_t) + 8 : 0);
  if (reply_bytes > call.service.limits.max_frame_bytes) {
    co_return make_error(ErrorCode::resource_exhausted,
                         "table '" + table.name() + "': a sample of n = " + std::to_string(most) +
                             " would be a reply of " + std::to_string(reply_bytes) +
                             " bytes, more than max_frame_bytes = " +
                             std::to_string(call.service.limits.max_frame_bytes) +
                             "; sample fewer items per request");
  }
  // A region too small for the columns of every row the request may draw (a client that
  // laid it out for another schema, say): the rows come in the frame, as without "into".
  if (into && reply_bytes - kHeaderBytes > into->target.bytes.size()) into.reset();

  const ValueStore& values = call.service.values;
  REPLAYD_CO_RETURN_IF_ERROR(co_await admit_when(
      call, call.table->sample_waiters,
      [&] { return table.may_sample(call.n, bound.resolve(values)); },
      bound.bounded() ? "not enough items of the versions asked for, or the rate limiter does "
                        "not admit this sample now"
                      : "not enough items or the rate limiter does not admit this sample now"));

  const std::uint64_t min_version = bound.resolve(values);
  const std::uint64_t drawn =
      batches == 1 ? 1 : admitted_batches(table, call.n, batches, min_version);
  // A table with a file tier copies every field: its cold rows are read into the reply
  // (or into the client's region, which the request keeps mapped until it is answered).
  const bool tiered = call.table->tier != nullptr;
  REPLAYD_CO_ASSIGN_OR_RETURN(
      PlainSampleReply out,
      plain_sample_reply(table.schema(), call.n * drawn, !keys_only, versions, !tiered,
                         into ? into->target.bytes : std::span<std::byte>{}));
  const std::uint32_t size_before = table.size();
  const SamplingMass mass_before = table.sampling_mass();
  table.set_now_ms(replay_now_ms());
  std::vector<ColdDraw> cold;
  SampleBuffers buffers = out.buffers();
  if (tiered) buffers.cold = &cold;
  REPLAYD_CO_RETURN_IF_ERROR(table.sample(call.n * drawn, beta, buffers, min_version));
  if (keys_only) out.fill_slots(table.storage().slot_bits());
  if (!cold.empty()) {
    // Suspends while the pool reads them; other requests are served meanwhile. The draws'
    // segments are taken before table_changed may delete any.
    std::shared_ptr<FileTier> tier = call.table->tier;
    const Status read = co_await tier->read_cold_into(table, cold, out.columns);
    table_changed(*call.table);
    REPLAYD_CO_RETURN_IF_ERROR(read);
  } else {
    table_changed(*call.table);
  }
  std::string extra;
  if (keys_only) {
    extra += region_meta(table);
    call.shared_bytes = call.n * drawn * table.schema().item_bytes();  // what the learner reads
  }
  if (into) {
    const std::uint64_t bytes = out.reply.payload_bytes();
    extra += ",\"into\":{\"arena\":" + std::to_string(into->arena) +
             ",\"offset\":" + std::to_string(into->offset) + ",\"bytes\":" + std::to_string(bytes) +
             "}";
    call.shared_bytes = bytes;  // what the learner reads from its arena
  }
  if (batches != 1) extra += ",\"batches\":" + std::to_string(drawn);
  if (versions) extra += ",\"versions\":true";
  if (bound.bounded()) extra += ",\"min_version\":" + std::to_string(min_version);
  co_return finish_plain_sample(*call.table, out, call.request_id, size_before, mass_before, extra);
}

}  // namespace replayd::service::commands
