// libFuzzer target: the bytes a hostile or broken client could send on one connection, run
// through what a Session does with them without a socket: the frame decoder (fed in pieces,
// payloads written in place as the session does), the token check of a TCP connection that
// must authenticate, and request dispatch with execution of every admitted insert and
// sample, against a ServiceContext whose three small tables are made afresh for each input
// (the context itself is built once: its metrics registry is most of an input's cost).
// Checks beyond "no crash, no sanitizer report": every reply is a well-formed frame whose
// metadata is a JSON object; an error reply carries a known code; a table never holds more
// than its capacity. The connection has the shared-memory plane: its tables live in shared
// memory (map_table), and it holds a staging arena whose bytes come from the input, so
// staged inserts and appends read what a hostile client wrote there.
// Build: scripts/fuzz (clang 14, -DREPLAYD_FUZZ=ON).
#include <boost/json.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <span>
#include <string>

#include "service/net/auth.h"
#include "service/protocol/wire_frame.h"
#include "service/service_context.h"
#include "service/shm/connection_plane.h"
#include "service/shm/shared_columns.h"
#include "service/table_description.h"
#include "tests/support/run_request.h"

namespace {

using namespace replayd;
using namespace replayd::service;

constexpr const char* kToken = "fuzz-token";

// Small limits, so that every limit is reachable from short inputs and no input can make
// the target allocate more than a few MiB.
Limits fuzz_limits() {
  Limits limits;
  limits.max_frame_bytes = 1 << 20;
  limits.max_meta_bytes = 4096;
  limits.max_batch_items = 64;
  limits.max_waiting_per_connection = 4;
  limits.max_table_bytes = 16 << 20;  // an episodic table counts 10 MiB of open episodes
  limits.max_tables = 4;
  return limits;
}

std::uint64_t fixed_seed() {
  return 7;
}

void add_table(ServiceContext& context, const char* description_json) {
  const auto description = boost::json::parse(description_json);
  auto config = parse_table_description(description, "table", 1);
  if (!config) std::abort();
  auto table = Table::create(std::move(config).value(), context.limits.max_table_bytes,
                             context.column_memory);
  if (!table) std::abort();
  context.tables.add(std::move(table).value());
}

void check(bool condition) {
  if (!condition) std::abort();
}

void check_reply(const Reply& reply) {
  static const std::set<std::string> kCodes{
      "invalid_argument", "not_found",          "already_exists",
      "timeout",          "resource_exhausted", "shutting_down",
      "protocol_error",   "unauthenticated",    "permission_denied"};
  check(reply.header[0] == std::byte{'R'} && reply.header[5] == std::byte{2});
  std::uint32_t meta_bytes = 0;
  std::uint64_t payload_bytes = 0;
  std::memcpy(&meta_bytes, reply.header.data() + 16, 4);
  std::memcpy(&payload_bytes, reply.header.data() + 24, 8);
  check(meta_bytes == reply.meta.size() && payload_bytes == reply.payload.size());
  boost::system::error_code ec;
  const auto meta = boost::json::parse(reply.meta, ec);
  check(!ec && meta.is_object());
  if (const auto* error = meta.get_object().if_contains("error")) {
    check(reply.is_error && reply.payload.empty());
    const auto& code = error->at("code").as_string();
    check(kCodes.contains(std::string(code.data(), code.size())));
  }
}

void check_tables(const ServiceContext& context) {
  for (const auto& hosted : context.tables.list()) {
    check(hosted->table->size() <= hosted->table->config().capacity);
  }
}

// What Session::handle does, minus waiting: a request that would park is dropped here
// (waiting is covered by the socket tests and tests/service/unit/admission_test.cpp).
void handle(ServiceContext& context, WireFrame frame, shm::ConnectionPlane& plane) {
  if (auto reply = testing::run_request(context, std::move(frame), /*writer=*/1, &plane)) {
    check_reply(*reply);
  }
  check_tables(context);
}

// The context every input shares; reachable for ever (not a leak).
ServiceContext& shared_context() {
  static ServiceContext* context = [] {
    auto* made = new ServiceContext;
    made->limits = fuzz_limits();
    made->seed_source = &fixed_seed;
    made->column_memory = new shm::SharedColumnSource;
    made->plane.max_staging_bytes = 1 << 20;
    made->plane.max_arenas = 64;
    made->plane.max_queued_descriptors = 64;
    return made;
  }();
  return *context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ServiceContext& context = shared_context();
  for (const auto& hosted : context.tables.list())  // what the previous input left
    context.tables.drop(hosted->table->name());
  add_table(context,
            R"({"name": "replay", "capacity": 8,
                "fields": [{"name": "obs", "dtype": "float32", "shape": [2]},
                           {"name": "act", "dtype": "int64"}],
                "sampler": {"kind": "prioritized", "priority_exponent": 0.6},
                "max_times_sampled": 3, "seed": 1})");
  add_table(context,
            R"({"name": "queue", "capacity": 4,
                "fields": [{"name": "x", "dtype": "uint8", "shape": [3]}],
                "sampler": "fifo", "max_times_sampled": 1,
                "rate_limiter": {"kind": "queue", "size": 4}, "seed": 2})");
  add_table(context,
            R"({"name": "pixels", "capacity": 8, "episodic": true,
                "fields": [{"name": "obs", "dtype": "uint8", "shape": [4], "stack": 2,
                            "next_of": true, "compression": "zstd"},
                           {"name": "rew", "dtype": "float32"}],
                "seed": 3})");

  // A staging arena (id 1) holding the input's bytes over and over.
  shm::ConnectionPlane plane(-1, {true, ""}, context.plane,
                             shm::ConnectionPlaneLimits{64 << 10, 4, 8});
  auto arena = plane.create_arena(4096);
  check(arena.ok() && arena->arena->id == 1);
  const auto staged = arena->arena->mapping.bytes();
  for (std::size_t i = 0; i < staged.size() && size > 0; ++i)
    staged[i] = static_cast<std::byte>(data[i % size]);

  // Inputs whose size is odd play a TCP connection that must authenticate first.
  bool authenticated = size % 2 == 0;
  context.auth_token = kToken;
  FrameDecoder decoder(
      authenticated ? FrameLimits{context.limits.max_frame_bytes, context.limits.max_meta_bytes}
                    : FrameLimits{kHeaderBytes + context.limits.max_meta_bytes,
                                  context.limits.max_meta_bytes});
  // The input arrives in pieces of a size derived from its length, as a socket splits it.
  const std::size_t piece = 1 + size % 61;
  std::span<const std::byte> rest(reinterpret_cast<const std::byte*>(data), size);
  bool direct = false;
  while (!rest.empty()) {
    std::span<const std::byte> chunk = rest.first(std::min(piece, rest.size()));
    const auto destination = decoder.payload_destination();
    std::size_t used;
    if (direct && !destination.empty()) {  // the session's in-place payload read
      used = std::min(destination.size(), chunk.size());
      std::memcpy(destination.data(), chunk.data(), used);
      decoder.commit_payload(used);
    } else {
      used = decoder.feed(chunk);
    }
    direct = !direct;
    rest = rest.subspan(used);
    if (decoder.has_frame()) {
      WireFrame frame = decoder.take_frame();
      if (!authenticated) {
        if (refuse_unauthenticated(context.auth_token, frame.meta)) return 0;  // closed
        authenticated = true;
        decoder.set_limits(
            FrameLimits{context.limits.max_frame_bytes, context.limits.max_meta_bytes});
      }
      handle(context, std::move(frame), plane);
    } else if (decoder.error() != DecodeError::none) {
      check(std::strlen(decode_error_message(decoder.error())) > 0);
      return 0;  // the session replies once and closes
    } else if (used == 0) {
      std::abort();  // no progress on non-empty input would hang a connection
    }
  }
  return 0;
}
