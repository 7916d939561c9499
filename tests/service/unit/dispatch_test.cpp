// Tests of service/commands/dispatch.h and the command table: a request runs through the entry
// its op names, and what the entry declares is checked before any handler acts.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <string>

#include "service/commands/command_table.h"
#include "tests/support/run_request.h"

using namespace replayd::service;

namespace {

std::uint64_t fixed_seed() {
  return 1;
}

WireFrame request(std::string meta, std::size_t payload_bytes = 0, std::uint64_t id = 5) {
  WireFrame frame;
  frame.header.request_id = id;
  frame.header.meta_bytes = static_cast<std::uint32_t>(meta.size());
  frame.header.payload_bytes = payload_bytes;
  frame.meta = std::move(meta);
  frame.payload = ByteBuffer(payload_bytes);
  if (payload_bytes) std::memset(frame.payload.data(), 0, payload_bytes);
  return frame;
}

struct Context {
  ServiceContext service;
  Context() {
    service.seed_source = &fixed_seed;
    service.limits.max_batch_items = 100;
  }
  Reply run(std::string meta, std::size_t payload_bytes = 0) {
    std::optional<Reply> reply =
        testing::run_request(service, request(std::move(meta), payload_bytes), 1);
    REQUIRE(reply);
    return std::move(*reply);
  }
};

std::string error_of(const Reply& reply) {
  return reply.is_error ? std::string(reply.error_code) + ": " + reply.meta : "ok";
}

constexpr const char* kCreate = R"({"op":"create_table","table":{"name":"t","capacity":10,)"
                                R"("fields":[{"name":"x","dtype":"float64","shape":[]}]}})";

}  // namespace

TEST_CASE("the command table names each operation once, and lookups find it") {
  std::set<std::string_view> names;
  for (const Command& command : command_table()) {
    CHECK(names.insert(command.name).second);
    CHECK(find_command(command.name) == &command);
    CHECK(command_table()[command_index(command)].name == command.name);
    CHECK(command.handler != nullptr);
    if (command.waits_on == WaitsOn::rate_limiter) {
      // A rate limiter is a table's: the request names its table, or its tables.
      const bool names_tables =
          std::find(command.fields.begin(), command.fields.end(), "tables") != command.fields.end();
      CHECK((command.needs_table || names_tables));
    }
  }
  CHECK(find_command("explode") == nullptr);
  CHECK(metric_op_labels().size() == command_table().size());
}

TEST_CASE("requests run through their entry and get their reply") {
  Context context;
  CHECK(context.run(R"({"op":"ping"})").meta == "{}");
  CHECK(error_of(context.run(kCreate)) == "ok");
  CHECK(context.run(R"({"op":"info","table":"t"})").meta.find("\"name\":\"t\"") !=
        std::string::npos);
  const Reply inserted = context.run(
      R"({"op":"insert","table":"t","n":2,"columns":[{"name":"x","dtype":"float64","shape":[2]}]})",
      16);
  CHECK(error_of(inserted) == "ok");
  CHECK(inserted.payload.size() == 16);  // two keys
  const Reply sampled = context.run(R"({"op":"sample","table":"t","n":3})");
  CHECK(error_of(sampled) == "ok");
  CHECK(sampled.meta.find("\"n\":3") != std::string::npos);
}

TEST_CASE("what an entry declares is checked before its handler runs") {
  Context context;
  REQUIRE(error_of(context.run(kCreate)) == "ok");
  CHECK_THAT(error_of(context.run(R"({"op":"explode"})")),
             Catch::Contains("invalid_argument") && Catch::Contains("unknown op 'explode'") &&
                 Catch::Contains("update_priorities"));
  CHECK_THAT(error_of(context.run(R"({"op":"ping","n":1})")),
             Catch::Contains("invalid_argument") && Catch::Contains("unknown key for op 'ping'"));
  CHECK_THAT(error_of(context.run(R"({"op":"ping"})", 8)),
             Catch::Contains("invalid_argument") && Catch::Contains("takes no payload"));
  CHECK_THAT(error_of(context.run(R"({"op":"sample","table":"nope","n":1})")),
             Catch::Contains("not_found") && Catch::Contains("'nope'"));
  CHECK_THAT(error_of(context.run(R"({"op":"sample","table":"t","n":0})")),
             Catch::Contains("invalid_argument") && Catch::Contains("n: must be >= 1"));
  CHECK_THAT(error_of(context.run(R"({"op":"sample","table":"t","n":101})")),
             Catch::Contains("resource_exhausted") && Catch::Contains("max_batch_items = 100"));
  CHECK_THAT(error_of(context.run(R"({"op":"sample","table":"t","n":1,"timeout_ms":-1})")),
             Catch::Contains("timeout_ms"));
  CHECK_THAT(error_of(context.run(R"({"no_op":1})")), Catch::Contains("op"));
  CHECK_THAT(error_of(context.run("[]")), Catch::Contains("invalid_argument"));
  CHECK_THAT(error_of(context.run("{")), Catch::Contains("JSON"));
}

TEST_CASE("a request that must wait suspends; timeout_ms 0 is refused at once") {
  Context context;
  REQUIRE(error_of(context.run(kCreate)) == "ok");
  CHECK_THAT(error_of(context.run(R"({"op":"sample","table":"t","n":1,"timeout_ms":0})")),
             Catch::Contains("timeout") && Catch::Contains("not enough items"));
  CHECK_FALSE(
      testing::run_request(context.service, request(R"({"op":"sample","table":"t","n":1})"), 1));
  // The suspended sample was cancelled as its connection closed: it left the table's queue.
  CHECK(context.service.tables.find("t")->sample_waiters.empty());
}

TEST_CASE("a sample whose reply would exceed max_frame_bytes is refused before drawing") {
  Context context;
  context.service.limits.max_frame_bytes = 2048;
  REQUIRE(error_of(context.run(kCreate)) == "ok");
  REQUIRE(
      error_of(context.run(
          R"({"op":"insert","table":"t","n":1,"columns":[{"name":"x","dtype":"float64","shape":[1]}]})",
          8)) == "ok");
  CHECK_THAT(error_of(context.run(R"({"op":"sample","table":"t","n":100})")),
             Catch::Contains("resource_exhausted") && Catch::Contains("max_frame_bytes = 2048"));
  CHECK(context.service.tables.find("t")->table->info().counters.samples == 0);
}

TEST_CASE("a stopping server refuses every request") {
  Context context;
  context.service.shutting_down = true;
  CHECK_THAT(error_of(context.run(R"({"op":"ping"})")), Catch::Contains("shutting_down"));
}
