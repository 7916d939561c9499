// Tests of service/config.h: every key of docs/CONFIG.md is read, defaults hold when absent,
// and a bad value is refused with an error naming the key.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "service/config.h"

using namespace replayd::service;

namespace {

std::uint64_t fixed_seed() {
  return 42;
}

replayd::Result<ServerConfig> parse(const std::string& text) {
  return parse_server_config(text, &fixed_seed);
}

std::string error_of(const std::string& text) {
  auto parsed = parse(text);
  REQUIRE_FALSE(parsed);
  return parsed.error().message;
}

}  // namespace

TEST_CASE("an empty config gives the documented defaults") {
  auto config = parse("{}");
  REQUIRE(config);
  const Limits defaults;
  CHECK(config->unix_path == "/tmp/replayd.sock");
  CHECK(config->tcp_address == "127.0.0.1:7700");
  CHECK(config->metrics_address == "127.0.0.1:9700");
  CHECK(config->limits.max_frame_bytes == defaults.max_frame_bytes);
  CHECK(config->limits.requests_per_turn == 64);
  CHECK(config->limits.learner_share == 0.7);
  CHECK(config->snapshot_keep == 3);
  CHECK(config->busy_poll_us == 0);
  CHECK(config->tables.empty());
}

TEST_CASE("every key is read") {
  auto config = parse(R"({
    "listen": {"unix": "/tmp/x.sock", "tcp": "127.0.0.1:0", "metrics": null, "unix_mode": "0600"},
    "auth": {"token": "secret-token"},
    "insecure": true,
    "log_level": "debug",
    "data_dir": "/tmp/replayd-data",
    "snapshot_interval_s": 60,
    "snapshot_keep": 5,
    "busy_poll_us": 200,
    "limits": {"max_frame_bytes": 8192, "max_meta_bytes": 1024, "max_batch_items": 10,
               "max_waiting_per_connection": 3, "max_queued_reply_bytes": 10000,
               "max_buffered_bytes": 20000, "max_connections": 7, "max_table_bytes": 123456, "max_tables": 4,
               "idle_timeout_ms": 0, "write_timeout_ms": 5, "socket_send_buffer_bytes": 0,
               "requests_per_turn": 2, "learner_share": 0.75},
    "tables": [{"name": "t", "capacity": 4, "fields": [{"name": "x", "dtype": "int8"}]}]
  })");
  REQUIRE(config);
  CHECK(config->unix_path == "/tmp/x.sock");
  CHECK(config->tcp_address == "127.0.0.1:0");
  CHECK(config->metrics_address.empty());
  CHECK(config->unix_mode == 0600);
  CHECK(config->auth_token == "secret-token");
  CHECK(config->insecure);
  CHECK(config->log_level == "debug");
  CHECK(config->data_dir == "/tmp/replayd-data");
  CHECK(config->snapshot_interval_s == 60);
  CHECK(config->snapshot_keep == 5);
  CHECK(config->busy_poll_us == 200);
  const Limits& l = config->limits;
  CHECK(l.max_frame_bytes == 8192);
  CHECK(l.max_meta_bytes == 1024);
  CHECK(l.max_batch_items == 10);
  CHECK(l.max_waiting_per_connection == 3);
  CHECK(l.max_queued_reply_bytes == 10000);
  CHECK(l.max_buffered_bytes == 20000);
  CHECK(l.max_connections == 7);
  CHECK(l.max_table_bytes == 123456);
  CHECK(l.max_tables == 4);
  CHECK(l.idle_timeout_ms == 0);
  CHECK(l.write_timeout_ms == 5);
  CHECK(l.socket_send_buffer_bytes == 0);
  CHECK(l.requests_per_turn == 2);
  CHECK(l.learner_share == 0.75);
  REQUIRE(config->tables.size() == 1);
  CHECK(config->tables[0].name == "t");
  CHECK(config->tables[0].seed == 42);
}

TEST_CASE("bad values are refused with an error that names the key") {
  CHECK_THAT(error_of(R"({"limits": {"max_frame_bytes": 10}})"),
             Catch::Contains("limits.max_frame_bytes") && Catch::Contains("between"));
  CHECK_THAT(error_of(R"({"limits": {"max_batch_items": -1}})"),
             Catch::Contains("limits.max_batch_items"));
  CHECK_THAT(error_of(R"({"limits": {"requests_per_turn": 0}})"),
             Catch::Contains("limits.requests_per_turn"));
  CHECK_THAT(error_of(R"({"limits": {"learner_share": 1.5}})"),
             Catch::Contains("limits.learner_share") && Catch::Contains("between 0 and 1"));
  CHECK_THAT(error_of(R"({"limits": {"learner_share": "half"}})"),
             Catch::Contains("limits.learner_share"));
  CHECK_THAT(error_of(R"({"limits": {"no_such_limit": 1}})"),
             Catch::Contains("limits.no_such_limit") && Catch::Contains("unknown key"));
  CHECK_THAT(error_of(R"({"listen": {"tcp": "nonsense"}})"), Catch::Contains("listen.tcp"));
  CHECK_THAT(error_of(R"({"listen": {"unix_mode": "999"}})"), Catch::Contains("listen.unix_mode"));
  CHECK_THAT(error_of(R"({"auth": {"token": "has space"}})"), Catch::Contains("auth.token"));
  CHECK_THAT(error_of(R"({"log_level": "loud"})"), Catch::Contains("log_level"));
  CHECK_THAT(error_of(R"({"snapshot_keep": 0})"), Catch::Contains("snapshot_keep"));
  CHECK_THAT(error_of(R"({"busy_poll_us": 100001})"),
             Catch::Contains("busy_poll_us") && Catch::Contains("between"));
  CHECK_THAT(error_of(R"({"busy_poll_us": -1})"), Catch::Contains("busy_poll_us"));
  CHECK_THAT(error_of(R"({"tables": {}})"), Catch::Contains("tables"));
  CHECK_THAT(error_of(R"({"surprise": 1})"), Catch::Contains("surprise"));
  CHECK_THAT(error_of("{not json"), Catch::Contains("JSON"));
}

TEST_CASE("the shipped default config parses") {
  std::ifstream in(REPLAYD_SOURCE_DIR "/config/replayd.json");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  auto config = parse(text.str());
  REQUIRE(config);
  CHECK(config->tables.size() == 1);
}

TEST_CASE("host:port and modes parse as documented") {
  CHECK(parse_host_port("127.0.0.1:7700")->port == 7700);
  CHECK(parse_host_port("[::1]:80")->host == "::1");
  CHECK_FALSE(parse_host_port("localhost"));
  CHECK_FALSE(parse_host_port("h:70000"));
  CHECK(*parse_unix_mode("660") == 0660);
  CHECK_FALSE(parse_unix_mode("0888"));
  CHECK(token_problem("ok-token") == std::nullopt);
  CHECK(token_problem(""));
}
