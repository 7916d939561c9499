// Tests of service/shm/connection_plane.h and the staged batches of
// service/protocol/row_batch.h: who is offered the plane (a Unix socket of the server's uid,
// never TCP, never with shared_memory off); staging arenas counted against the connection's
// and the server's budgets before they are created, and released; a staged batch viewed in
// its arena, its ids and priorities copied out of the client's reach, and refused by name
// when it names bytes outside the arena.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "service/protocol/row_batch.h"
#include "service/shm/connection_plane.h"

using namespace replayd;
using namespace replayd::service;
using Catch::Contains;

namespace {

namespace json = boost::json;

struct SocketPair {
  int fds[2] = {-1, -1};
  explicit SocketPair(int domain) {
    if (domain == AF_UNIX) {
      REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    } else {
      fds[0] = ::socket(AF_INET, SOCK_STREAM, 0);
      REQUIRE(fds[0] >= 0);
    }
  }
  ~SocketPair() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
};

std::unique_ptr<Table> plain_table() {
  TableConfig config;
  config.name = "replay";
  config.schema =
      Schema::create({Field{"obs", DType::float32, {2}}, Field{"act", DType::int64, {}}}).value();
  config.capacity = 16;
  return Table::create(config).value();
}

Result<commands::RowBatch> decode(std::string_view meta_text, std::uint64_t n,
                                  const StagingLookup* staging, const Table& table) {
  const json::value meta = json::parse(meta_text);
  JsonReader args = JsonReader::of(meta, "").value();
  ByteBuffer payload;
  return commands::decode_row_batch(args, table, n, payload, false, 0, staging);
}

constexpr const char* kStagedOne =
    R"({"priorities": true, "staged": {"arena": 1, "offset": 0, "rows": 4},
        "columns": [{"name": "obs", "dtype": "float32", "shape": [2, 2]},
                    {"name": "act", "dtype": "int64", "shape": [2]}]})";

}  // namespace

TEST_CASE("the plane is offered to a Unix-socket peer of the server's uid only") {
  SocketPair unix_pair(AF_UNIX);
  CHECK(shm::plane_access(unix_pair.fds[0], true).offered);
  const auto off = shm::plane_access(unix_pair.fds[0], false);
  CHECK_FALSE(off.offered);
  CHECK_THAT(off.reason, Contains("shared_memory off"));
  SocketPair tcp(AF_INET);
  const auto refused = shm::plane_access(tcp.fds[0], true);
  CHECK_FALSE(refused.offered);
  CHECK_THAT(refused.reason, Contains("Unix sockets only"));
}

shm::PlaneBudget budget_of(std::uint64_t bytes, std::uint64_t arenas = 1024) {
  shm::PlaneBudget budget;
  budget.max_staging_bytes = bytes;
  budget.max_arenas = arenas;
  budget.max_queued_descriptors = 1024;
  return budget;
}

shm::ConnectionPlaneLimits limits_of(std::uint64_t bytes, std::uint64_t arenas = 64,
                                     std::uint64_t unread = 64) {
  return {bytes, arenas, unread};
}

TEST_CASE("staging arenas are counted against both budgets before they are created") {
  auto budget = budget_of(12288);
  shm::ConnectionPlane first(-1, {true, ""}, budget, limits_of(8192));
  shm::ConnectionPlane second(-1, {true, ""}, budget, limits_of(8192));
  auto a = first.create_arena(8192);
  REQUIRE(a);
  CHECK(budget.staging_bytes == 8192);
  auto over_connection = first.create_arena(4096);
  REQUIRE_FALSE(over_connection);
  CHECK(over_connection.error().code == ErrorCode::resource_exhausted);
  CHECK_THAT(over_connection.error().message, Contains("max_staging_bytes_per_connection"));
  auto over_server = second.create_arena(8192);
  REQUIRE_FALSE(over_server);
  CHECK_THAT(over_server.error().message, Contains("max_staging_bytes = 12288"));
  CHECK(second.create_arena(4096));
  CHECK(budget.staging_bytes == 12288);
  CHECK(first.release_arena(a->arena->id));
  CHECK_FALSE(first.release_arena(a->arena->id));
  CHECK(budget.staging_bytes == 4096);
  auto too_large = first.create_arena(8193);
  REQUIRE_FALSE(too_large);
  CHECK(too_large.error().code == ErrorCode::invalid_argument);
}

TEST_CASE("an arena counts whole pages and one of a bounded number, however few bytes it asks") {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  auto budget = budget_of(1 << 20, 3);
  shm::ConnectionPlane first(-1, {true, ""}, budget, limits_of(1 << 20, 2));
  shm::ConnectionPlane second(-1, {true, ""}, budget, limits_of(1 << 20, 2));
  auto one_byte = first.create_arena(1);
  REQUIRE(one_byte);
  CHECK(budget.staging_bytes == page);
  CHECK(first.held_bytes() == page);
  REQUIRE(first.create_arena(1));
  auto third = first.create_arena(1);
  REQUIRE_FALSE(third);
  CHECK(third.error().code == ErrorCode::resource_exhausted);
  CHECK_THAT(third.error().message, Contains("max_staging_arenas_per_connection = 2"));
  REQUIRE(second.create_arena(1));
  auto over_server = second.create_arena(1);
  REQUIRE_FALSE(over_server);
  CHECK_THAT(over_server.error().message, Contains("max_staging_arenas = 3"));
  CHECK(budget.arenas == 3);
  CHECK(first.release_arena(one_byte->arena->id));
  CHECK(budget.arenas == 2);
  CHECK(second.create_arena(1));
}

TEST_CASE("the server keeps no descriptor of an arena: its memfd goes to the reply") {
  auto budget = budget_of(1 << 20);
  shm::ConnectionPlane plane(-1, {true, ""}, budget, limits_of(1 << 20));
  auto grant = plane.create_arena(4096);
  REQUIRE(grant);
  REQUIRE(grant->fd.valid());
  const int fd = grant->fd.get();
  { UniqueFd sent = std::move(grant->fd); }  // the reply went out
  CHECK(::fcntl(fd, F_GETFD) == -1);         // nothing else held it
  CHECK(plane.staged_bytes(grant->arena->id));
}

TEST_CASE("a reply target is the arena's writable bytes, kept mapped after its release") {
  auto budget = budget_of(1 << 20);
  shm::ConnectionPlane plane(-1, {true, ""}, budget, limits_of(1 << 20));
  auto grant = plane.create_arena(8192);
  REQUIRE(grant);
  auto target = plane.reply_target(grant->arena->id);
  REQUIRE(target);
  REQUIRE(target->bytes.size() == 8192);
  CHECK(plane.release_arena(grant->arena->id));
  grant->arena.reset();
  std::memset(target->bytes.data(), 0x5a, target->bytes.size());  // still mapped: its hold
  CHECK(target->bytes[8191] == std::byte{0x5a});
  auto gone = plane.reply_target(999);
  REQUIRE_FALSE(gone);
  CHECK(gone.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(gone.error().message, Contains("into.arena") && Contains("map_staging"));
  shm::ConnectionPlane refused(-1, {false, "TCP"}, budget, limits_of(1 << 20));
  auto no_plane = refused.reply_target(1);
  REQUIRE_FALSE(no_plane);
  CHECK(no_plane.error().code == ErrorCode::permission_denied);
}

TEST_CASE("replies carrying descriptors are bounded until the client reads them") {
  SocketPair pair(AF_UNIX);
  auto budget = budget_of(1 << 20);
  budget.max_queued_descriptors = 3;
  shm::ConnectionPlane plane(pair.fds[0], {true, ""}, budget, limits_of(1 << 20, 64, 2));
  auto first = plane.hold_descriptor_reply();
  REQUIRE(first);
  auto second = plane.hold_descriptor_reply();
  REQUIRE(second);
  CHECK(budget.queued_descriptors == 2);
  auto third = plane.hold_descriptor_reply();
  REQUIRE_FALSE(third);
  CHECK(third.error().code == ErrorCode::resource_exhausted);
  CHECK_THAT(third.error().message, Contains("max_unread_descriptors_per_connection = 2"));
  // Written, but the client has not read what was sent: still counted.
  REQUIRE(::write(pair.fds[0], "reply", 5) == 5);
  first->reset();
  second->reset();
  CHECK(budget.queued_descriptors == 0);
  CHECK_FALSE(plane.hold_descriptor_reply());
  // Read: the next may come.
  char sink[5];
  REQUIRE(::read(pair.fds[1], sink, 5) == 5);
  auto after_read = plane.hold_descriptor_reply();
  CHECK(after_read);
  // The server-wide bound on descriptors queued in unwritten replies.
  shm::ConnectionPlane other(-1, {true, ""}, budget, limits_of(1 << 20));
  auto a = other.hold_descriptor_reply();
  auto b = other.hold_descriptor_reply();
  REQUIRE((a && b));
  auto over = other.hold_descriptor_reply();
  REQUIRE_FALSE(over);
  CHECK_THAT(over.error().message, Contains("max_queued_descriptors = 3"));
}

TEST_CASE("a dropped table's block counts while connections that were sent it are open") {
  auto budget = budget_of(1 << 20);
  {
    shm::ConnectionPlane first(-1, {true, ""}, budget, limits_of(1 << 20));
    {
      shm::ConnectionPlane second(-1, {true, ""}, budget, limits_of(1 << 20));
      first.block_sent(7, 65536);
      second.block_sent(7, 65536);
      second.block_sent(7, 65536);  // sent twice to one connection: one holder
      CHECK(budget.dropped_block_bytes == 0);
      budget.block_dropped(7);
      budget.block_dropped(7);
      CHECK(budget.dropped_block_bytes == 65536);
    }
    CHECK(budget.dropped_block_bytes == 65536);
  }
  CHECK(budget.dropped_block_bytes == 0);
  CHECK(budget.sent_blocks.empty());
}

TEST_CASE("a connection without the plane gets no arena and no staged batch") {
  auto budget = budget_of(1 << 20);
  shm::ConnectionPlane plane(-1, {false, "shared memory is offered on Unix sockets only"}, budget,
                             limits_of(1 << 20));
  auto arena = plane.create_arena(4096);
  REQUIRE_FALSE(arena);
  CHECK(arena.error().code == ErrorCode::permission_denied);
  CHECK_THAT(arena.error().message, Contains("Unix sockets only"));
  auto table = plain_table();
  auto batch = decode(kStagedOne, 2, &plane, *table);
  REQUIRE_FALSE(batch);
  CHECK(batch.error().code == ErrorCode::permission_denied);
  auto unconnected = decode(kStagedOne, 2, nullptr, *table);
  REQUIRE_FALSE(unconnected);
  CHECK(unconnected.error().code == ErrorCode::permission_denied);
}

TEST_CASE("a staged batch views its rows in the arena and copies its priorities") {
  auto budget = budget_of(1 << 20);
  shm::ConnectionPlane plane(-1, {true, ""}, budget, limits_of(1 << 20));
  auto arena = plane.create_arena(4096);
  REQUIRE(arena);
  REQUIRE(arena->arena->id == 1);
  std::byte* bytes = arena->arena->mapping.bytes().data();
  // Laid out for 4 rows: obs 32 bytes at 0, act 32 at 32, priorities 32 at 64.
  const float obs[4] = {1, 2, 3, 4};
  const std::int64_t act[2] = {7, 8};
  const double priorities[2] = {0.5, 2};
  std::memcpy(bytes, obs, sizeof obs);
  std::memcpy(bytes + 32, act, sizeof act);
  std::memcpy(bytes + 64, priorities, sizeof priorities);
  auto table = plain_table();
  auto batch = decode(kStagedOne, 2, &plane, *table);
  INFO((batch ? std::string() : batch.error().message));
  REQUIRE(batch);
  CHECK(batch->rows.values[0].data() == bytes);
  CHECK(batch->rows.values[0].size() == 16);
  CHECK(batch->rows.values[1].data() == bytes + 32);
  REQUIRE(batch->priorities.size() == 2);
  CHECK(batch->priorities[1] == 2);
  // The client changing its arena after the request was decoded changes no priority.
  const double changed = std::nan("");
  std::memcpy(bytes + 72, &changed, sizeof changed);
  CHECK(batch->priorities[1] == 2);
  // Released while a batch uses it, the arena stays mapped until the batch goes.
  CHECK(plane.release_arena(1));
  std::int64_t first_act = 0;
  std::memcpy(&first_act, batch->rows.values[1].data(), sizeof first_act);
  CHECK(first_act == 7);
}

TEST_CASE("a staged batch naming bytes outside its arena is refused by name") {
  auto budget = budget_of(1 << 20);
  shm::ConnectionPlane plane(-1, {true, ""}, budget, limits_of(1 << 20));
  REQUIRE(plane.create_arena(4096));
  auto table = plain_table();
  auto refusal = [&](std::string_view staged) {
    const std::string meta = std::string(R"({"staged": )") + std::string(staged) +
                             R"(, "columns": [{"name": "obs", "dtype": "float32", "shape": [2, 2]},
                         {"name": "act", "dtype": "int64", "shape": [2]}]})";
    auto batch = decode(meta, 2, &plane, *table);
    REQUIRE_FALSE(batch);
    return batch.error().message;
  };
  // 2 rows take 16 + 16 bytes: the last offset that fits is 4064.
  CHECK(decode(R"({"staged": {"arena": 1, "offset": 4064},
                   "columns": [{"name": "obs", "dtype": "float32", "shape": [2, 2]},
                               {"name": "act", "dtype": "int64", "shape": [2]}]})",
               2, &plane, *table));
  CHECK_THAT(refusal(R"({"arena": 1, "offset": 4072})"), Contains("past the end of the arena"));
  CHECK_THAT(refusal(R"({"arena": 1, "offset": 18446744073709551608})"),
             Contains("past the end of the arena"));
  CHECK_THAT(refusal(R"({"arena": 1, "offset": 4, "rows": 2})"), Contains("multiple of 8"));
  CHECK_THAT(refusal(R"({"arena": 1, "offset": 0, "rows": 4294967295})"),
             Contains("past the end of the arena"));
  CHECK_THAT(refusal(R"({"arena": 1, "offset": 0, "rows": 1})"), Contains("between n (2)"));
  CHECK_THAT(refusal(R"({"arena": 2, "offset": 0})"), Contains("no staging arena 2"));
  CHECK_THAT(refusal(R"({"arena": 1})"), Contains("offset"));
  CHECK_THAT(refusal(R"(7)"), Contains("staged"));
}
