#include "replayd_client/client.h"

#include <boost/json/serialize.hpp>
#include <cmath>
#include <cstdlib>

#include "replayd_client/wire/json_text.h"
#include "replayd_client/wire/request_meta.h"
#include "replayd_client/wire/wire_frame_codec.h"

namespace replayd::client {
namespace {

// ,"min_version":v  or  ,"max_staleness":k[,"value":NAME]; nothing when neither is set.
void append_bound_keys(std::string& meta, const std::optional<std::uint64_t>& min_version,
                       const std::optional<std::uint64_t>& max_staleness,
                       const std::string& value) {
  if (min_version) {
    meta.append(",\"min_version\":");
    append_json_uint(meta, *min_version);
  }
  if (max_staleness) {
    meta.append(",\"max_staleness\":");
    append_json_uint(meta, *max_staleness);
    if (!value.empty()) {
      meta.append(",\"value\":");
      append_json_string(meta, value);
    }
  }
}

// One table's entry of a mixed batch's "bounds": null, or an object of the keys above.
void append_version_bound(std::string& meta, const VersionBoundOption& bound) {
  if (!bound.min_version && !bound.max_staleness) {
    meta.append("null");
    return;
  }
  const std::size_t start = meta.size();
  append_bound_keys(meta, bound.min_version, bound.max_staleness, bound.value);
  meta[start] = '{';  // the first key's comma opens the object
  meta.push_back('}');
}

}  // namespace

Client::Client(std::string_view address, ClientOptions options)
    : connection_(std::make_unique<Connection>(parse_address(address), options.max_in_flight)),
      client_name_(std::move(options.client_name)),
      token_(std::move(options.token)),
      shared_memory_(options.shared_memory &&
                     connection_->address().kind == Address::Kind::unix_socket) {
  if (!token_) {
    if (const char* token = std::getenv("REPLAYD_TOKEN"); token && *token) token_ = token;
  }
  hello_ = hello();
  if (hello_.protocol != kProtocolVersion) {
    throw Error(ErrorCode::bad_reply, connection_->address().to_string() + " speaks protocol " +
                                          std::to_string(hello_.protocol) +
                                          ", this client speaks " +
                                          std::to_string(kProtocolVersion));
  }
}

Client::~Client() = default;

std::future<ServerHello> Client::hello_async() {
  std::string& meta = scratch_meta();
  meta.append("{\"op\":\"hello\",\"protocol\":");
  append_json_uint(meta, kProtocolVersion);
  meta.append(",\"client\":");
  append_json_string(meta, client_name_);
  if (token_) {
    meta.append(",\"token\":");
    append_json_string(meta, *token_);
  }
  if (shared_memory_) meta.append(",\"shm\":true");
  meta.push_back('}');
  return connection_->call<ServerHello, decode_hello>(meta, {});
}

std::future<void> Client::ping_async() {
  return connection_->call<void, decode_empty>("{\"op\":\"ping\"}", {});
}

std::future<boost::json::object> Client::info_async(std::optional<std::string_view> table) {
  if (!table) return connection_->call<boost::json::object, decode_object>("{\"op\":\"info\"}", {});
  std::string& meta = table_request("info", *table);
  meta.push_back('}');
  return connection_->call<boost::json::object, decode_object>(meta, {});
}

std::future<boost::json::object> Client::create_table_async(const boost::json::object& description,
                                                            bool exist_ok) {
  std::string& meta = scratch_meta();
  meta.append("{\"op\":\"create_table\",\"table\":");
  meta.append(boost::json::serialize(description));
  meta.append(exist_ok ? ",\"exist_ok\":true}" : ",\"exist_ok\":false}");
  return connection_->call<boost::json::object, decode_table_info>(meta, {});
}

std::future<boost::json::array> Client::list_tables_async() {
  return connection_->call<boost::json::array, decode_tables>("{\"op\":\"list_tables\"}", {});
}

std::future<void> Client::drop_table_async(std::string_view table) {
  std::string& meta = table_request("drop_table", table);
  meta.push_back('}');
  return connection_->call<void, decode_empty>(meta, {});
}

std::future<void> Client::reset_table_async(std::string_view table) {
  std::string& meta = table_request("reset_table", table);
  meta.push_back('}');
  return connection_->call<void, decode_empty>(meta, {});
}

std::future<Keys> Client::insert_async(std::string_view table, const InsertBatch& batch,
                                       InsertOptions options) {
  std::string& meta = scratch_meta();
  batch.append_meta(meta, table, options.timeout_ms);
  if (options.version) {
    meta.pop_back();  // the closing brace
    meta.append(",\"version\":");
    append_json_uint(meta, *options.version);
    meta.push_back('}');
  }
  return connection_->call<Keys, decode_keys>(meta, batch.payload());
}

std::future<SampleBatch> Client::sample_async(std::string_view table, std::uint64_t n,
                                              SampleOptions options) {
  if (!std::isfinite(options.beta)) {
    throw Error(ErrorCode::invalid_argument, "sample: beta must be finite and >= 0");
  }
  std::string& meta = sample_request(table, n, options.beta, options.timeout_ms);
  if (options.versions) meta.append(",\"versions\":true");
  append_bound_keys(meta, options.min_version, options.max_staleness, options.value);
  meta.push_back('}');
  return connection_->call<SampleBatch, decode_sample>(meta, {});
}

std::future<SampleBatch> Client::sample_tables_async(std::span<const std::string> tables,
                                                     std::span<const std::uint64_t> counts,
                                                     SampleOptions options,
                                                     std::span<const VersionBoundOption> bounds) {
  if (!std::isfinite(options.beta)) {
    throw Error(ErrorCode::invalid_argument, "sample_mixed: beta must be finite and >= 0");
  }
  if (tables.empty() || tables.size() != counts.size()) {
    throw Error(ErrorCode::invalid_argument, "sample_mixed: give one count per table (" +
                                                 std::to_string(tables.size()) + " tables, " +
                                                 std::to_string(counts.size()) + " counts)");
  }
  if (!bounds.empty() && bounds.size() != tables.size()) {
    throw Error(ErrorCode::invalid_argument, "sample_mixed: give one version bound per table (" +
                                                 std::to_string(tables.size()) + " tables, " +
                                                 std::to_string(bounds.size()) + " bounds)");
  }
  std::string& meta = scratch_meta();
  meta.append("{\"op\":\"sample_mixed\",\"tables\":[");
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < tables.size(); ++i) {
    if (i) meta.push_back(',');
    append_json_string(meta, tables[i]);
    n += counts[i];
  }
  meta.append("],\"counts\":[");
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (i) meta.push_back(',');
    append_json_uint(meta, counts[i]);
  }
  meta.append("],\"n\":");
  append_json_uint(meta, n);
  meta.append(",\"beta\":");
  append_json_double(meta, options.beta);
  meta.append(",\"timeout_ms\":");
  append_json_optional_uint(meta, options.timeout_ms);
  if (options.versions) meta.append(",\"versions\":true");
  if (!bounds.empty()) {
    meta.append(",\"bounds\":[");
    for (std::size_t i = 0; i < bounds.size(); ++i) {
      if (i) meta.push_back(',');
      append_version_bound(meta, bounds[i]);
    }
    meta.push_back(']');
  }
  meta.push_back('}');
  return connection_->call<SampleBatch, decode_sample>(meta, {});
}

std::future<UpdateResult> Client::update_priorities_async(std::string_view table,
                                                          std::span<const std::uint64_t> keys,
                                                          std::span<const double> priorities) {
  if (keys.size() != priorities.size()) {
    throw Error(ErrorCode::invalid_argument, "update_priorities: " + std::to_string(keys.size()) +
                                                 " keys but " + std::to_string(priorities.size()) +
                                                 " priorities");
  }
  std::string& meta = table_request("update_priorities", table);
  meta.append(",\"n\":");
  append_json_uint(meta, keys.size());
  meta.push_back('}');
  const std::array<PayloadPiece, 2> payload{std::as_bytes(keys), std::as_bytes(priorities)};
  return connection_->call<UpdateResult, decode_update>(meta, payload);
}

std::future<DeleteResult> Client::delete_keys_async(std::string_view table,
                                                    std::span<const std::uint64_t> keys) {
  std::string& meta = table_request("delete", table);
  meta.append(",\"n\":");
  append_json_uint(meta, keys.size());
  meta.push_back('}');
  const std::array<PayloadPiece, 1> payload{std::as_bytes(keys)};
  return connection_->call<DeleteResult, decode_delete>(meta, payload);
}

std::future<Reply> Client::request_async(std::string_view meta,
                                         std::span<const PayloadPiece> payload) {
  return connection_->call<Reply, decode_raw>(meta, payload);
}

}  // namespace replayd::client
