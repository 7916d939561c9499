// `sample_mixed` (docs/PROTOCOL.md, docs/MIXED.md): one batch drawn from several tables, a
// given number of rows from each ("tables" and "counts", in that order; the counts sum to
// "n"), in one request and one reply. The tables must hold the same fields (plain items, no
// frame fields); each table's rows are drawn by its own selector, with its own importance
// weights, and count against its own rate limiter.
//
// Waiting: the request runs once every table admits its share at the same moment. It waits
// in the sample queue of the first table that does not admit it (in arrival order there),
// then checks all of them again; a table that stopped admitting meanwhile is waited on in
// turn. The deadline ("timeout_ms") covers the whole wait.
//
// "rows": "keys" (or "auto" where every table allows it) leaves the fields out: each part
// names the column block its rows are gathered from, as a keys-only `sample` does.
//
// Policy versions (docs/VERSIONS.md): "versions": true adds each draw's version as a last
// column; "bounds", one entry per table (null, or {"min_version": v} or {"max_staleness": k,
// "value": NAME} as a plain sample takes them), draws that table's share from its items of
// the versions asked for only, and its admission counts those items only. A bound's value
// is read again each time the waiting request is reconsidered.
#include <chrono>
#include <cmath>
#include <set>

#include "service/commands/handlers.h"
#include "service/protocol/sample_reply.h"
#include "service/shm/connection_plane.h"
#include "service/shm/shared_columns.h"
#include "service/values/policy_versions.h"
#include "service/waiting/admission.h"

namespace replayd::service::commands {
namespace {

// Tables one request may mix: enough for any mix of sources, small enough that the
// request's checks stay trivial.
constexpr std::size_t kMaxMixedTables = 16;

struct Share {
  std::shared_ptr<HostedTable> hosted;
  std::uint64_t count = 0;
  std::uint64_t begin = 0;  // its first row in the batch
  VersionBound bound;       // none unless "bounds" names one for this table
};

// "tables" and "counts" as the shares of the batch, each table found and distinct.
Result<std::vector<Share>> read_shares(Call& call) {
  const boost::json::value* tables = call.args.value("tables");
  const boost::json::value* counts = call.args.value("counts");
  if (tables == nullptr || !tables->is_array() || tables->as_array().empty())
    return call.args.error("tables", "expected a non-empty list of table names");
  if (counts == nullptr || !counts->is_array())
    return call.args.error("counts", "expected a list of row counts, one per table");
  const auto& names = tables->as_array();
  const auto& numbers = counts->as_array();
  if (names.size() > kMaxMixedTables) {
    return call.args.error("tables", "names " + std::to_string(names.size()) +
                                         " tables; a mixed sample takes at most " +
                                         std::to_string(kMaxMixedTables));
  }
  if (numbers.size() != names.size()) {
    return call.args.error("counts", "has " + std::to_string(numbers.size()) + " entries for " +
                                         std::to_string(names.size()) +
                                         " tables; give one count per table");
  }
  std::vector<Share> shares;
  std::set<std::string, std::less<>> seen;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!names[i].is_string()) return call.args.error("tables", "expected table names (strings)");
    const std::string name(names[i].as_string());
    if (!seen.insert(name).second) {
      return call.args.error(
          "tables", "names table '" + name + "' twice; give each table once with its whole count");
    }
    const auto* count = numbers[i].if_uint64();
    const auto* signed_count = numbers[i].if_int64();
    if (count == nullptr && (signed_count == nullptr || *signed_count < 1))
      return call.args.error("counts", "expected integers >= 1 (leave out a table of 0 rows)");
    const std::uint64_t rows = count ? *count : static_cast<std::uint64_t>(*signed_count);
    if (rows == 0)
      return call.args.error("counts", "expected integers >= 1 (leave out a table of 0 rows)");
    auto hosted = call.service.tables.find(name);
    if (!hosted) return make_error(ErrorCode::not_found, "table '" + name + "' does not exist");
    shares.push_back(Share{std::move(hosted), rows, total, VersionBound{}});
    total += rows;
    if (total > call.n) break;
  }
  if (total != call.n) {
    return call.args.error(
        "counts", "sum to " + std::to_string(total) + " rows, not n = " + std::to_string(call.n));
  }
  return shares;
}

// "bounds": one entry per table, null or a plain sample's version bound (see the top).
Status read_bounds(Call& call, std::vector<Share>& shares) {
  const boost::json::value* bounds = call.args.value("bounds");
  if (bounds == nullptr) return Ok{};
  if (!bounds->is_array() || bounds->as_array().size() != shares.size()) {
    return call.args.error("bounds",
                           "expected a list of one entry per table (null, or "
                           "{\"min_version\": v} or {\"max_staleness\": k})");
  }
  for (std::size_t i = 0; i < shares.size(); ++i) {
    const boost::json::value& entry = bounds->as_array()[i];
    if (entry.is_null()) continue;
    REPLAYD_ASSIGN_OR_RETURN(JsonReader reader,
                             JsonReader::of(entry, "bounds[" + std::to_string(i) + "]"));
    REPLAYD_ASSIGN_OR_RETURN(shares[i].bound,
                             VersionBound::parse(reader, *shares[i].hosted->table));
    REPLAYD_RETURN_IF_ERROR(reader.finish());
  }
  return Ok{};
}

// The tables must hold the same fields (a batch has one set of columns) and be sampled as
// plain items: names the first difference.
Status check_tables(const std::vector<Share>& shares) {
  const Table& first = *shares.front().hosted->table;
  for (const Share& share : shares) {
    const Table& table = *share.hosted->table;
    if (table.schema().has_frames()) {
      return make_error(ErrorCode::invalid_argument,
                        "table '" + table.name() +
                            "' has frame fields: its rows are assembled per n-step sample; "
                            "sample_mixed takes tables of plain items (mix such tables with "
                            "one sample request per table)");
    }
    REPLAYD_RETURN_IF_ERROR(table.check_plain_sample());
    if (&table == &first || table.schema() == first.schema()) continue;
    const Schema& a = first.schema();
    const Schema& b = table.schema();
    for (std::size_t f = 0; f < std::max(a.size(), b.size()); ++f) {
      if (f < a.size() && f < b.size() && a.field(f) == b.field(f)) continue;
      const std::string name = f < a.size() ? a.field(f).name : b.field(f).name;
      return make_error(ErrorCode::invalid_argument,
                        "field '" + name + "' differs between table '" + first.name() +
                            "' and table '" + table.name() +
                            "': a mixed batch needs tables of the same fields (names, dtypes, "
                            "shapes, in order)");
    }
  }
  return Ok{};
}

// The first share whose table does not admit its rows now (of its bound's versions), or
// shares.size().
std::size_t first_refusing(const std::vector<Share>& shares, const ValueStore& values) {
  for (std::size_t i = 0; i < shares.size(); ++i) {
    const Share& share = shares[i];
    if (share.hosted->dropped ||
        !share.hosted->table->may_sample(share.count, share.bound.resolve(values)))
      return i;
  }
  return shares.size();
}

// Waits until every table admits its share at once (see the top of the file).
asio::awaitable<Status> admit_all(Call& call, const std::vector<Share>& shares) {
  const auto start = std::chrono::steady_clock::now();
  const auto whole = call.timeout;
  while (true) {
    const std::size_t i = first_refusing(shares, call.service.values);
    if (i == shares.size()) co_return Ok{};
    const Share& share = shares[i];
    const Table& table = *share.hosted->table;
    if (share.hosted->dropped) {
      co_return make_error(ErrorCode::not_found, "table '" + table.name() +
                                                     "' was dropped while the sample_mixed waited");
    }
    if (whole) {
      const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
      call.timeout = spent >= *whole ? std::chrono::milliseconds(0) : *whole - spent;
    }
    call.table = share.hosted;  // admission names and watches this table
    const ValueStore& values = call.service.values;
    Status admitted = co_await admit_when(
        call, share.hosted->sample_waiters,
        [&table, &share, &values] {
          return table.may_sample(share.count, share.bound.resolve(values));
        },
        share.bound.bounded()
            ? "not enough items of the versions asked for, or the rate limiter does not "
              "admit this table's share now"
            : "not enough items or the rate limiter does not admit this table's share now");
    call.table = nullptr;
    call.timeout = whole;
    if (!admitted) co_return admitted;
  }
}

}  // namespace

asio::awaitable<Result<Reply>> sample_mixed(Call& call) {
  REPLAYD_CO_ASSIGN_OR_RETURN(double beta, call.args.number_or("beta", 0.4));
  if (!std::isfinite(beta) || beta < 0)
    co_return call.args.error("beta", "must be finite and >= 0");
  REPLAYD_CO_ASSIGN_OR_RETURN(auto rows, call.args.optional_string("rows"));
  if (rows && *rows != "copy" && *rows != "keys" && *rows != "auto")
    co_return call.args.error("rows", "expected \"copy\" (the default), \"keys\" or \"auto\"");
  REPLAYD_CO_ASSIGN_OR_RETURN(const bool versions, call.args.boolean_or("versions", false));
  REPLAYD_CO_ASSIGN_OR_RETURN(std::vector<Share> shares, read_shares(call));
  REPLAYD_CO_RETURN_IF_ERROR(check_tables(shares));
  REPLAYD_CO_RETURN_IF_ERROR(read_bounds(call, shares));
  bool keys_only = rows && *rows != "copy";
  for (const Share& share : shares) {
    if (!keys_only || rows_in_shared_memory(call, *share.hosted->table)) continue;
    if (*rows == "keys") {
      co_return call.args.error(
          "rows",
          "\"keys\" needs every table in shared memory with items that do not retire "
          "when sampled; table '" +
              share.hosted->table->name() + "' is not");
    }
    keys_only = false;  // "auto": copy the rows of every table
  }
  const Schema& schema = shares.front().hosted->table->schema();
  const std::uint64_t reply_bytes = sample_reply_bytes(keys_only ? Schema() : schema, call.n) +
                                    (versions ? call.n * sizeof(std::uint64_t) + 8 : 0);
  if (reply_bytes > call.service.limits.max_frame_bytes) {
    co_return make_error(ErrorCode::resource_exhausted,
                         "a mixed sample of n = " + std::to_string(call.n) +
                             " would be a reply of " + std::to_string(reply_bytes) +
                             " bytes, more than max_frame_bytes = " +
                             std::to_string(call.service.limits.max_frame_bytes) +
                             "; sample fewer items per request");
  }

  REPLAYD_CO_RETURN_IF_ERROR(co_await admit_all(call, shares));

  // Every table admits its share now: draw them all in this turn (no suspension below, so
  // rows viewed in place go out before any other handler touches a table). A mix with a
  // table of a file tier copies every row instead, and reads the cold ones after the draws
  // (suspended; the reads take their segments before that).
  bool any_tier = false;
  for (const Share& share : shares)
    any_tier = any_tier || share.hosted->tier != nullptr;
  REPLAYD_CO_ASSIGN_OR_RETURN(PlainSampleReply out,
                              plain_sample_reply(schema, call.n, !keys_only, versions, !any_tier));
  std::vector<std::vector<ColdDraw>> cold(shares.size());
  std::vector<std::vector<ColdRead>> cold_reads(shares.size());
  std::vector<std::span<std::byte>> part_columns;
  std::vector<std::span<const std::byte*>> part_rows;
  std::string parts = ",\"parts\":[";
  const std::uint64_t now_ms = replay_now_ms();
  for (std::size_t i = 0; i < shares.size(); ++i) {
    Share& share = shares[i];
    Table& table = *share.hosted->table;
    table.set_now_ms(now_ms);
    const std::uint64_t min_version = share.bound.resolve(call.service.values);
    SampleBuffers buffers = out.buffers(share.begin, share.count, part_columns, part_rows);
    if (share.hosted->tier) buffers.cold = &cold[i];
    REPLAYD_CO_RETURN_IF_ERROR(table.sample(share.count, beta, buffers, min_version));
    if (keys_only) out.fill_slots(table.storage().slot_bits(), share.begin, share.count);
    if (!cold[i].empty()) {
      std::vector<std::span<std::byte>> columns;
      for (std::size_t f = 0; f < schema.size(); ++f) {
        const std::uint64_t bytes = table.storage().item_bytes(f);
        columns.push_back(out.columns[f].subspan(share.begin * bytes, share.count * bytes));
      }
      cold_reads[i] = share.hosted->tier->take_cold_reads(table, cold[i], columns);
    }
    table_changed(*share.hosted);
    if (i != 0) parts += ',';
    parts += "{\"table\":" + boost::json::serialize(boost::json::string(table.name())) +
             ",\"n\":" + std::to_string(share.count);
    if (keys_only) parts += region_meta(table);
    if (share.bound.bounded()) parts += ",\"min_version\":" + std::to_string(min_version);
    parts += '}';
  }
  parts += ']';
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (cold_reads[i].empty()) continue;
    std::shared_ptr<FileTier> tier = shares[i].hosted->tier;
    REPLAYD_CO_RETURN_IF_ERROR(
        co_await tier->read_cold(*shares[i].hosted->table, std::move(cold_reads[i])));
  }
  if (versions) parts += ",\"versions\":true";
  if (keys_only) call.shared_bytes = call.n * schema.item_bytes();
  co_return finish_mixed_sample(*shares.front().hosted, out, call.request_id, parts);
}

}  // namespace replayd::service::commands
