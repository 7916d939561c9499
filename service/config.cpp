#include "service/config.h"

#include <charconv>
#include <set>

#include "service/net/auth.h"
#include "service/protocol/json_reader.h"
#include "service/protocol/sample_reply.h"
#include "service/table_description.h"

namespace replayd::service {
namespace json = boost::json;
namespace {

template <typename T>
Status read_limit(JsonReader& reader, std::string_view key, T& target, std::uint64_t min_value,
                  std::uint64_t max_value) {
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t value, reader.uint_or(key, target));
  if (value < min_value || value > max_value) {
    return reader.error(
        key, "must be between " + std::to_string(min_value) + " and " + std::to_string(max_value));
  }
  target = static_cast<T>(value);
  return Ok{};
}

Status parse_limits(const json::value& value, Limits& limits) {
  REPLAYD_ASSIGN_OR_RETURN(JsonReader reader, JsonReader::of(value, "limits"));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "max_frame_bytes", limits.max_frame_bytes, 4096, std::uint64_t{1} << 40));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "max_meta_bytes", limits.max_meta_bytes, 256, std::uint64_t{1} << 26));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "max_batch_items", limits.max_batch_items, 1, std::uint64_t{1} << 31));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_waiting_per_connection",
                                     limits.max_waiting_per_connection, 1, 1u << 20));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_nstep", limits.max_nstep, 1, 1u << 24));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_nstep_walk_steps", limits.max_nstep_walk_steps, 1,
                                     std::uint64_t{1} << 40));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_sequence_sample_steps",
                                     limits.max_sequence_sample_steps, 1, std::uint64_t{1} << 40));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_open_episodes_per_connection",
                                     limits.max_open_episodes_per_connection, 1, 1u << 16));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "max_sequence_steps", limits.max_sequence_steps, 1, 1u << 24));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_queued_reply_bytes",
                                     limits.max_queued_reply_bytes, 4096, std::uint64_t{1} << 40));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_buffered_bytes", limits.max_buffered_bytes, 4096,
                                     std::uint64_t{1} << 44));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "max_connections", limits.max_connections, 1, 1u << 20));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_unauthenticated_connections",
                                     limits.max_unauthenticated_connections, 1, 1u << 16));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "auth_timeout_ms", limits.auth_timeout_ms, 100, 3600000));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "max_table_bytes", limits.max_table_bytes, 1, std::uint64_t{1} << 50));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_tables", limits.max_tables, 1, 1u << 16));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_tables_total_bytes",
                                     limits.max_tables_total_bytes, 0, std::uint64_t{1} << 56));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "idle_timeout_ms", limits.idle_timeout_ms, 0, std::uint64_t{1} << 40));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "write_timeout_ms", limits.write_timeout_ms, 0, std::uint64_t{1} << 40));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "socket_send_buffer_bytes", limits.socket_send_buffer_bytes, 0, 1u << 30));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "requests_per_turn", limits.requests_per_turn, 1, 1u << 16));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_staging_bytes_per_connection",
                                     limits.max_staging_bytes_per_connection, 0,
                                     std::uint64_t{1} << 40));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "max_staging_bytes", limits.max_staging_bytes, 0, std::uint64_t{1} << 44));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_staging_arenas_per_connection",
                                     limits.max_staging_arenas_per_connection, 0, 1u << 16));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "max_staging_arenas", limits.max_staging_arenas, 0, 1u << 20));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "tier_segment_bytes", limits.tier_segment_bytes,
                                     std::uint64_t{1} << 20, std::uint64_t{1} << 32));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_unread_descriptors_per_connection",
                                     limits.max_unread_descriptors_per_connection, 1, 1u << 16));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "max_queued_descriptors", limits.max_queued_descriptors, 1, 1u << 20));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "max_value_bytes", limits.max_value_bytes, 0, std::uint64_t{1} << 44));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "max_values_bytes", limits.max_values_bytes, 0, std::uint64_t{1} << 46));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_values", limits.max_values, 0, 1u << 16));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "max_publishes_per_connection",
                                     limits.max_publishes_per_connection, 0, 1u << 10));
  REPLAYD_ASSIGN_OR_RETURN(limits.learner_share,
                           reader.number_or("learner_share", limits.learner_share));
  if (!(limits.learner_share >= 0 && limits.learner_share <= 1)) {
    return reader.error("learner_share", "must be between 0 and 1");
  }
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "http_header_timeout_ms", limits.http_header_timeout_ms, 100, 3600000));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "http_max_connections", limits.http_max_connections, 2, 1u << 16));
  return reader.finish();
}

}  // namespace

std::optional<std::string> token_problem(std::string_view token) {
  if (token.empty() || token.size() > kMaxTokenBytes) {
    return "must be 1 to " + std::to_string(kMaxTokenBytes) + " characters";
  }
  for (const char c : token) {
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e) {
      return std::string("must be printable ASCII without spaces");
    }
  }
  return std::nullopt;
}

Result<unsigned> parse_unix_mode(std::string_view text) {
  unsigned mode = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mode, 8);
  if (text.empty() || text.size() > 4 || ec != std::errc() || end != text.data() + text.size() ||
      mode > 0777) {
    std::string message(text);  // built by appending: g++ 12 warns (falsely) on "'" + string
    message.append(": expected an octal mode such as \"0660\"");
    return make_error(ErrorCode::invalid_argument, std::move(message));
  }
  return mode;
}

Result<HostPort> parse_host_port(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return make_error(ErrorCode::invalid_argument,
                      "address '" + std::string(text) + "': expected HOST:PORT");
  }
  HostPort result;
  result.host = std::string(text.substr(0, colon));
  if (result.host.size() >= 2 && result.host.front() == '[' && result.host.back() == ']') {
    result.host = result.host.substr(1, result.host.size() - 2);
  }
  const auto port_text = text.substr(colon + 1);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535) {
    return make_error(ErrorCode::invalid_argument,
                      "address '" + std::string(text) + "': port must be a number 0-65535");
  }
  result.port = static_cast<std::uint16_t>(port);
  return result;
}

Result<ServerConfig> parse_server_config(std::string_view text, std::uint64_t (*seed_source)()) {
  REPLAYD_ASSIGN_OR_RETURN(json::value document, parse_json(text, "the config file"));
  REPLAYD_ASSIGN_OR_RETURN(JsonReader reader, JsonReader::of(document, ""));
  ServerConfig config;
  if (const json::value* listen = reader.value("listen"); listen && !listen->is_null()) {
    REPLAYD_ASSIGN_OR_RETURN(JsonReader listen_reader, JsonReader::of(*listen, "listen"));
    REPLAYD_ASSIGN_OR_RETURN(auto unix_path, listen_reader.optional_string("unix"));
    if (unix_path) config.unix_path = *unix_path;
    if (listen_reader.has("unix") && listen_reader.value("unix")->is_null()) config.unix_path = "";
    REPLAYD_ASSIGN_OR_RETURN(auto tcp, listen_reader.optional_string("tcp"));
    if (tcp) config.tcp_address = *tcp;
    if (listen_reader.has("tcp") && listen_reader.value("tcp")->is_null()) config.tcp_address = "";
    if (!config.tcp_address.empty()) {
      auto parsed = parse_host_port(config.tcp_address);
      if (!parsed) return listen_reader.error("tcp", parsed.error().message);
    }
    REPLAYD_ASSIGN_OR_RETURN(auto metrics, listen_reader.optional_string("metrics"));
    if (metrics) config.metrics_address = *metrics;
    if (listen_reader.has("metrics") && listen_reader.value("metrics")->is_null()) {
      config.metrics_address = "";
    }
    if (!config.metrics_address.empty()) {
      auto parsed = parse_host_port(config.metrics_address);
      if (!parsed) return listen_reader.error("metrics", parsed.error().message);
    }
    REPLAYD_ASSIGN_OR_RETURN(auto unix_mode, listen_reader.optional_string("unix_mode"));
    if (unix_mode) {
      auto mode = parse_unix_mode(*unix_mode);
      if (!mode) return listen_reader.error("unix_mode", mode.error().message);
      config.unix_mode = *mode;
    }
    REPLAYD_RETURN_IF_ERROR(listen_reader.finish());
  }
  if (const json::value* auth = reader.value("auth"); auth && !auth->is_null()) {
    REPLAYD_ASSIGN_OR_RETURN(JsonReader auth_reader, JsonReader::of(*auth, "auth"));
    REPLAYD_ASSIGN_OR_RETURN(auto token, auth_reader.optional_string("token"));
    if (token) {
      if (auto problem = token_problem(*token)) return auth_reader.error("token", *problem);
      config.auth_token = *token;
    }
    REPLAYD_RETURN_IF_ERROR(auth_reader.finish());
  }
  REPLAYD_ASSIGN_OR_RETURN(config.insecure, reader.boolean_or("insecure", false));
  REPLAYD_ASSIGN_OR_RETURN(config.shared_memory, reader.boolean_or("shared_memory", true));
  REPLAYD_ASSIGN_OR_RETURN(auto log_level, reader.optional_string("log_level"));
  if (log_level) {
    static const std::set<std::string> kLevels{"trace", "debug",    "info", "warn",
                                               "error", "critical", "off"};
    if (!kLevels.contains(*log_level)) {
      return reader.error("log_level", "expected trace, debug, info, warn, error, critical or off");
    }
    config.log_level = *log_level;
  }
  if (reader.has("data_dir") && reader.value("data_dir")->is_null()) {
    config.data_dir = "";
  } else {
    REPLAYD_ASSIGN_OR_RETURN(auto data_dir, reader.optional_string("data_dir"));
    if (data_dir) config.data_dir = *data_dir;
  }
  REPLAYD_ASSIGN_OR_RETURN(auto tier_dir, reader.optional_string("tier_dir"));
  if (tier_dir) config.tier_dir = *tier_dir;
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "snapshot_interval_s", config.snapshot_interval_s, 0, 1u << 24));
  REPLAYD_RETURN_IF_ERROR(read_limit(reader, "snapshot_keep", config.snapshot_keep, 1, 1000));
  REPLAYD_RETURN_IF_ERROR(
      read_limit(reader, "busy_poll_us", config.busy_poll_us, 0, kMaxBusyPollUs));
  REPLAYD_ASSIGN_OR_RETURN(config.allow_empty_start, reader.boolean_or("allow_empty_start", false));
  if (const json::value* limits = reader.value("limits"); limits && !limits->is_null()) {
    REPLAYD_RETURN_IF_ERROR(parse_limits(*limits, config.limits));
  }
  if (const json::value* tables = reader.value("tables"); tables && !tables->is_null()) {
    if (!tables->is_array()) return reader.error("tables", "expected an array of tables");
    std::set<std::string> names;
    for (std::size_t i = 0; i < tables->get_array().size(); ++i) {
      const std::string path = "tables[" + std::to_string(i) + "]";
      REPLAYD_ASSIGN_OR_RETURN(
          TableConfig table, parse_table_description(tables->get_array()[i], path, seed_source()));
      REPLAYD_RETURN_IF_ERROR(commands::check_item_fits_frames(
          table, config.limits.max_frame_bytes, path + " (table '" + table.name + "')"));
      if (!names.insert(table.name).second) {
        return make_error(ErrorCode::invalid_argument,
                          path + ".name: table '" + table.name + "' is defined twice");
      }
      config.tables.push_back(std::move(table));
    }
    if (config.tables.size() > config.limits.max_tables) {
      return reader.error("tables", "more tables than limits.max_tables");
    }
  }
  REPLAYD_RETURN_IF_ERROR(reader.finish());
  return config;
}

}  // namespace replayd::service
