// The shared-memory data plane through the C++ client against the real binary: a keys-only
// sample gathered from the table's mapping holds exactly the rows a copying sample of the same
// draws holds; staged inserts store the rows an explorer wrote into its arena; a gather flags
// rows overwritten under it; a PlaneSampler's batches are a copying sample's, and hold no
// row that changed under its copy; TCP never gets the plane.
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <string>

#include "replayd_client/shm/plane_sampler.h"
#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {
namespace {

constexpr const char* kTable = R"({"name": "plane", "capacity": 64, "seed": 5,
    "fields": [{"name": "id", "dtype": "int64"},
               {"name": "obs", "dtype": "float32", "shape": [1024]}],
    "sampler": "uniform", "remover": "fifo",
    "rate_limiter": {"kind": "min_size", "min_size_to_sample": 1}})";

// The table `name` of kTable's description.
boost::json::object table_named(const std::string& name) {
  boost::json::object description = json_object(kTable);
  description["name"] = name;
  return description;
}

// Inserts ids [first, first + n) with obs[j] = id + j, staged through `arena` at offset 0.
rc::Keys insert_staged(rc::Client& client, rc::StagingArena& arena, std::int64_t first,
                       std::uint64_t n, const std::string& table = "plane") {
  auto bytes = arena.bytes();
  auto* ids = reinterpret_cast<std::int64_t*>(bytes.data());
  const std::uint64_t obs_offset = (n * 8 + 7) / 8 * 8;
  auto* obs = reinterpret_cast<float*>(bytes.data() + obs_offset);
  for (std::uint64_t i = 0; i < n; ++i) {
    ids[i] = first + static_cast<std::int64_t>(i);
    for (std::uint64_t j = 0; j < 1024; ++j)
      obs[i * 1024 + j] = static_cast<float>(ids[i] + static_cast<std::int64_t>(j));
  }
  rc::InsertBatch batch(n);
  batch.add("id", rc::DType::int64, {}, bytes.subspan(0, n * 8));
  batch.add("obs", rc::DType::float32, {1024}, bytes.subspan(obs_offset, n * 4096));
  return client.insert_staged_async(table, batch, {&arena, 0, n}).get();
}

// Every row of `batch` is the item its id names (obs[j] = id + j), and ids are >= `least`.
void check_rows(const rc::SampleBatch& batch, std::int64_t least) {
  const auto ids = batch.field("id").as<std::int64_t>();
  const auto obs = batch.field("obs").as<float>();
  for (std::size_t row = 0; row < batch.size(); ++row) {
    REQUIRE(ids[row] >= least);
    for (std::size_t j = 0; j < 1024; ++j)
      REQUIRE(obs[row * 1024 + j] == static_cast<float>(ids[row] + static_cast<std::int64_t>(j)));
  }
}

}  // namespace

TEST_CASE("staged inserts store the arena's rows and gathered samples hold them exactly", "[shm]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  REQUIRE(client.shm_offered());
  client.create_table(json_object(kTable));
  auto arena = client.map_staging(1 << 20);
  const rc::Keys keys = insert_staged(client, *arena, 100, 40);
  REQUIRE(keys.size() == 40);
  CHECK(table_size(client, "plane") == 40);

  const auto mapping = client.map_table("plane");
  REQUIRE(mapping->columns().size() == 2);
  const rc::SampleBatch draws = client.sample_keys_async("plane", 200).get().draws;
  REQUIRE(draws.size() == 200);
  std::vector<std::int64_t> ids(200);
  std::vector<float> obs(200 * 1024);
  std::vector<std::byte*> out{reinterpret_cast<std::byte*>(ids.data()),
                              reinterpret_cast<std::byte*>(obs.data())};
  CHECK(mapping->gather(draws.keys(), out).empty());  // nothing overwrites meanwhile
  std::map<std::uint64_t, std::int64_t> id_of_key;
  for (std::size_t i = 0; i < keys.size(); ++i)
    id_of_key[keys[i]] = 100 + static_cast<std::int64_t>(i);
  for (std::size_t row = 0; row < 200; ++row) {
    REQUIRE(id_of_key.at(draws.keys()[row]) == ids[row]);
    for (std::size_t j = 0; j < 1024; j += 97)
      REQUIRE(obs[row * 1024 + j] == static_cast<float>(ids[row] + static_cast<std::int64_t>(j)));
  }
}

TEST_CASE("a gather flags the rows whose slots were overwritten under it", "[shm]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(json_object(kTable));
  auto arena = client.map_staging(1 << 20);
  insert_staged(client, *arena, 0, 64);
  const auto mapping = client.map_table("plane");
  const rc::SampleBatch draws = client.sample_keys_async("plane", 64).get().draws;
  insert_staged(client, *arena, 1000, 64);  // every slot overwritten before the gather
  std::vector<std::int64_t> ids(64);
  std::vector<float> obs(64 * 1024);
  std::vector<std::byte*> out{reinterpret_cast<std::byte*>(ids.data()),
                              reinterpret_cast<std::byte*>(obs.data())};
  CHECK(mapping->gather(draws.keys(), out).size() == 64);
}

TEST_CASE("a PlaneSampler's batches are the socket's under the same seed", "[shm]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  auto arena = client.map_staging(1 << 20);
  for (const char* name : {"plane", "twin"}) {  // two tables of one seed and the same items
    client.create_table(table_named(name));
    insert_staged(client, *arena, 100, 40, name);
  }
  rc::PlaneSampler sampler(client, "plane");
  for (int round = 0; round < 3; ++round) {
    const rc::SampleBatch gathered = sampler.sample(200);
    const rc::SampleBatch copied = client.sample("twin", 200);  // rows through the socket
    REQUIRE(gathered.size() == 200);
    REQUIRE(gathered.layout()->columns.size() == copied.layout()->columns.size());
    for (std::size_t c = 0; c < copied.layout()->columns.size(); ++c) {
      const rc::ColumnView mine = gathered.column(c);
      const rc::ColumnView theirs = copied.column(c);
      INFO("column " << theirs.name());
      CHECK(mine.name() == theirs.name());
      CHECK(mine.dtype() == theirs.dtype());
      CHECK(mine.shape() == theirs.shape());
      REQUIRE(mine.bytes().size() == theirs.bytes().size());
      CHECK(std::memcmp(mine.bytes().data(), theirs.bytes().data(), mine.bytes().size()) == 0);
    }
    check_rows(gathered, 100);
  }
  CHECK(sampler.changed_rows() == 0);
}

TEST_CASE("a PlaneSampler draws again the rows overwritten under its copy", "[shm]") {
  ServerProcess server;
  rc::Client client(server.unix_address());
  client.create_table(json_object(kTable));
  auto arena = client.map_staging(1 << 20);
  const rc::Keys old_keys = insert_staged(client, *arena, 0, 64);
  rc::PlaneSampler sampler(client, "plane");
  rc::DrawnKeys drawn = client.sample_keys_async("plane", 64).get();
  const rc::Keys new_keys = insert_staged(client, *arena, 1000, 64);  // every slot overwritten
  const rc::SampleBatch batch = sampler.complete(std::move(drawn));
  CHECK(sampler.changed_rows() == 64);
  check_rows(batch, 1000);  // no row of the old items, none torn
  const auto ids = batch.field("id").as<std::int64_t>();
  for (std::size_t row = 0; row < batch.size(); ++row)  // each key is its row's item
    REQUIRE(batch.keys()[row] == new_keys[static_cast<std::size_t>(ids[row] - 1000)]);
  CHECK(batch.times_sampled()[0] == 1);
  CHECK(old_keys.size() == 64);

  client.drop_table("plane");  // a new table of the same name is another block
  client.create_table(json_object(kTable));
  insert_staged(client, *arena, 0, 8);
  CHECK_THROWS_WITH(sampler.sample(4), Catch::Contains("dropped or replaced"));
}

TEST_CASE("a TCP client is never offered the plane", "[shm]") {
  ServerProcess server;
  rc::Client client(server.tcp_address());
  CHECK_FALSE(client.shm_offered());
  CHECK_THAT(client.server_hello().shm_reason, Catch::Contains("not asked for"));
  client.create_table(json_object(kTable));
  try {
    client.map_table("plane");
    FAIL("map_table over TCP succeeded");
  } catch (const rc::Error& e) {
    CHECK(e.code() == rc::ErrorCode::permission_denied);
  }
  try {
    client.map_staging(4096);
    FAIL("map_staging over TCP succeeded");
  } catch (const rc::Error& e) {
    CHECK(e.code() == rc::ErrorCode::permission_denied);
  }
}

}  // namespace replayd::testing
