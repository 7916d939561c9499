// Malformed input over real sockets: every broken frame gets its documented error code,
// the connection closes exactly when the frame boundary is lost, and the server keeps
// serving its other clients and their data throughout.
#include <catch2/catch.hpp>

#include "raw_socket.h"
#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

constexpr std::uint64_t kId = 0x1122334455667788;

// A server with one table holding three items, and a client connected to it before the
// abuse starts; check_unharmed() proves both still work.
struct Scene {
  ServerProcess server;
  rc::Client bystander{server.unix_address()};

  Scene() {
    bystander.create_table(json_object(R"({"name": "t", "capacity": 100,
        "fields": [{"name": "obs", "dtype": "float32", "shape": [2]},
                   {"name": "act", "dtype": "int64", "shape": []}]})"));
    const std::vector<float> obs{1, 2, 3, 4, 5, 6};
    const std::vector<std::int64_t> act{1, 2, 3};
    rc::InsertBatch batch(3);
    batch.add("obs", obs, {2}).add("act", act);
    bystander.insert("t", batch);
  }

  RawSocket raw(const std::string& transport) {
    return transport == "tcp" ? RawSocket::connect_tcp(server.tcp_host(), server.tcp_port())
                              : RawSocket::connect_unix(server.unix_path());
  }

  void check_unharmed() {
    REQUIRE(server.running());
    bystander.ping();
    CHECK(table_size(bystander, "t") == 3);
    rc::Client fresh(server.tcp_address());
    CHECK(fresh.sample("t", 2, {.timeout_ms = 10000}).size() == 2);
  }
};

struct FramingCase {
  const char* what;
  RawFrame frame;
  const char* code;
};

std::vector<FramingCase> framing_cases() {
  std::vector<FramingCase> cases;
  auto with = [](auto change) {
    RawFrame frame;
    frame.request_id = kId;
    change(frame);
    return frame;
  };
  cases.push_back({"bad magic", with([](RawFrame& f) { f.magic = "RPLX"; }), "protocol_error"});
  cases.push_back({"bad version", with([](RawFrame& f) { f.version = 2; }), "protocol_error"});
  cases.push_back(
      {"reply kind from a client", with([](RawFrame& f) { f.kind = 2; }), "protocol_error"});
  cases.push_back({"unknown kind", with([](RawFrame& f) { f.kind = 9; }), "protocol_error"});
  cases.push_back({"non-zero flags", with([](RawFrame& f) { f.flags = 1; }), "protocol_error"});
  cases.push_back(
      {"non-zero reserved", with([](RawFrame& f) { f.reserved = 5; }), "protocol_error"});
  cases.push_back({"meta_bytes 0", with([](RawFrame& f) { f.meta_bytes = 0; }), "protocol_error"});
  cases.push_back({"meta_bytes over max_meta_bytes",
                   with([](RawFrame& f) { f.meta_bytes = (64 << 10) + 1; }), "resource_exhausted"});
  cases.push_back({"payload over max_frame_bytes",
                   with([](RawFrame& f) { f.payload_bytes = std::uint64_t{1} << 40; }),
                   "resource_exhausted"});
  cases.push_back({"payload_bytes near 2^64",
                   with([](RawFrame& f) { f.payload_bytes = ~std::uint64_t{0}; }),
                   "resource_exhausted"});
  return cases;
}

}  // namespace

TEST_CASE("a broken frame header gets one error reply and the connection closes", "[malformed]") {
  const std::string transport = GENERATE("unix", "tcp");
  Scene scene;
  for (const auto& test : framing_cases()) {
    INFO(transport << ": " << test.what);
    RawSocket socket = scene.raw(transport);
    // A valid ping follows in the same write: the server must not read it as a frame.
    auto bytes = test.frame.bytes();
    RawFrame ping;
    ping.request_id = 99;
    const auto ping_bytes = ping.bytes();
    bytes.insert(bytes.end(), ping_bytes.begin(), ping_bytes.end());
    socket.send(bytes);
    const RawReply reply = socket.read_reply();
    CHECK(reply.kind == 2);
    CHECK(reply.error_code() == test.code);
    CHECK(reply.request_id == kId);  // the header was read, so the reply names the request
    CHECK(reply.payload.empty());
    CHECK(socket.closed_by_server());
    CHECK(socket.discarded_bytes() == 0);  // no reply to the ping that followed
  }
  scene.check_unharmed();
}

TEST_CASE("a connection that ends inside a frame is closed without a reply", "[malformed]") {
  const std::string transport = GENERATE("unix", "tcp");
  Scene scene;
  RawFrame frame;
  frame.meta = R"({"op":"delete","table":"t","n":1})";
  frame.payload.resize(8);
  const auto bytes = frame.bytes();
  for (std::size_t cut : {std::size_t{1}, std::size_t{10}, std::size_t{31}, std::size_t{32},
                          std::size_t{40}, bytes.size() - 1}) {
    INFO(transport << ": connection ends after " << cut << " bytes");
    RawSocket socket = scene.raw(transport);
    socket.send(std::span(bytes).first(cut));
    socket.shutdown_send();
    CHECK(socket.closed_by_server());
    CHECK(socket.discarded_bytes() == 0);
  }
  scene.check_unharmed();
}

TEST_CASE("well framed but wrong requests get invalid_argument and the connection stays open",
          "[malformed]") {
  const std::string transport = GENERATE("unix", "tcp");
  Scene scene;
  RawSocket socket = scene.raw(transport);
  const std::vector<std::pair<std::string, std::string>> cases{
      {"invalid JSON", R"({"op": "ping")"},
      {"not JSON at all", "\xff\xfe garbage"},
      {"a JSON array", R"(["op", "ping"])"},
      {"a JSON string", R"("ping")"},
      {"a JSON number", "42"},
      {"no op", R"({"table": "t"})"},
      {"op not a string", R"({"op": 7})"},
      {"unknown op", R"({"op": "explode"})"},
      {"unknown key", R"({"op": "ping", "surprise": 1})"},
      {"sample n = 0", R"({"op": "sample", "table": "t", "n": 0})"},
      {"sample n negative", R"({"op": "sample", "table": "t", "n": -1})"},
      {"negative beta", R"({"op": "sample", "table": "t", "n": 1, "beta": -1})"},
  };
  std::uint64_t id = 100;
  for (const auto& [what, meta] : cases) {
    INFO(transport << ": " << what);
    RawFrame frame;
    frame.request_id = ++id;
    frame.meta = meta;
    socket.send(frame);
    const RawReply reply = socket.read_reply();
    CHECK(reply.request_id == id);
    CHECK(reply.error_code() == "invalid_argument");
    CHECK(!reply.json().at("error").as_object().at("message").as_string().empty());
  }
  // Still open: a ping on the same socket is answered.
  RawFrame ping;
  ping.request_id = 7;
  socket.send(ping);
  const RawReply pong = socket.read_reply();
  CHECK(pong.request_id == 7);
  CHECK(pong.error_code().empty());
  scene.check_unharmed();
}

TEST_CASE("inserts with the wrong dtype, shape, length or fields are rejected and store nothing",
          "[malformed]") {
  const std::string transport = GENERATE("unix", "tcp");
  Scene scene;
  rc::Client client(scene.server.address(transport));
  const std::vector<float> obs2{1, 2, 3, 4};
  const std::vector<std::int64_t> act2{1, 2};
  const std::vector<std::int32_t> obs2_as_int32{1, 2, 3, 4};
  const std::vector<float> obs_wide{1, 2, 3, 4, 5, 6};
  const std::vector<double> act2_as_double{1, 2};

  auto rejected = [&](rc::InsertBatch& batch) {
    return error_code_of([&] { client.insert("t", batch); });
  };
  {
    INFO("obs sent as int32 where the table has float32");
    rc::InsertBatch batch(2);
    batch.add("obs", obs2_as_int32, {2}).add("act", act2);
    CHECK(rejected(batch) == rc::ErrorCode::invalid_argument);
  }
  {
    INFO("act sent as float64 where the table has int64");
    rc::InsertBatch batch(2);
    batch.add("obs", obs2, {2}).add("act", act2_as_double);
    CHECK(rejected(batch) == rc::ErrorCode::invalid_argument);
  }
  {
    INFO("obs with item shape [3] where the table has [2]");
    rc::InsertBatch batch(2);
    batch.add("obs", obs_wide, {3}).add("act", act2);
    CHECK(rejected(batch) == rc::ErrorCode::invalid_argument);
  }
  {
    INFO("a missing field");
    rc::InsertBatch batch(2);
    batch.add("obs", obs2, {2});
    CHECK(rejected(batch) == rc::ErrorCode::invalid_argument);
  }
  {
    INFO("fields in the wrong order");
    rc::InsertBatch batch(2);
    batch.add("act", act2).add("obs", obs2, {2});
    CHECK(rejected(batch) == rc::ErrorCode::invalid_argument);
  }
  {
    INFO("an unknown extra field");
    rc::InsertBatch batch(2);
    batch.add("obs", obs2, {2}).add("act", act2).add("extra", act2);
    CHECK(rejected(batch) == rc::ErrorCode::invalid_argument);
  }
  {
    INFO("a negative priority");
    const std::vector<double> priorities{1.0, -1.0};
    rc::InsertBatch batch(2);
    batch.add("obs", obs2, {2}).add("act", act2).priorities(priorities);
    CHECK(rejected(batch) == rc::ErrorCode::invalid_argument);
  }
  {
    INFO("a payload shorter than the columns declare (sent raw)");
    rc::InsertBatch batch(2);
    batch.add("obs", obs2, {2}).add("act", act2);
    std::string meta;
    batch.append_meta(meta, "t", std::nullopt);
    const std::vector<std::byte> short_payload(8 * 2 + 8);
    const std::array<rc::PayloadPiece, 1> pieces{short_payload};
    auto reply = client.request_async(meta, pieces);
    CHECK(error_code_of([&] { reply.get(); }) == rc::ErrorCode::invalid_argument);
  }
  {
    INFO("an unknown table");
    rc::InsertBatch batch(2);
    batch.add("obs", obs2, {2}).add("act", act2);
    CHECK(error_code_of([&] { client.insert("no_such_table", batch); }) ==
          rc::ErrorCode::not_found);
    CHECK(error_code_of([&] { client.sample("no_such_table", 1); }) == rc::ErrorCode::not_found);
  }
  {
    INFO("n above max_batch_items");
    auto future = client.request_async(R"({"op":"sample","table":"t","n":100000000})");
    CHECK(error_code_of([&] { future.get(); }) == rc::ErrorCode::resource_exhausted);
  }
  CHECK(table_stat(client, "t", "counters", "inserts") == 3);
  client.ping();
  scene.check_unharmed();
}

}  // namespace replayd::testing
