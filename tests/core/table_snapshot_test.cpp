// Tests for core/table_snapshot.* and core/snapshot_sections.*: a restored table behaves
// exactly as the original for every sampler/remover kind; damaged images (truncated at any
// section boundary or byte, any byte flipped, bad magic or version, lengths over limits,
// values that break invariants under valid checksums) are rejected with a reason; a sink or
// source that fails reports its error.
#include "core/snapshot/table_snapshot.h"

#include <catch2/catch.hpp>

#include <bit>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/snapshot/crc32c.h"

namespace replayd {
namespace {

using Catch::Matchers::Contains;

Schema id_schema() {
  auto schema = Schema::create({Field{"id", DType::int64, {}}, Field{"obs", DType::float32, {3}}});
  REQUIRE(schema.ok());
  return schema.value();
}

TableConfig config_of(SelectorKind sampler, SelectorKind remover, std::uint32_t max_times,
                      std::string name = "replay") {
  TableConfig config;
  config.name = std::move(name);
  config.schema = id_schema();
  config.capacity = 16;
  config.sampler = SelectorConfig{sampler, 0.7};
  config.remover = remover;
  config.max_times_sampled = max_times;
  config.rate_limiter = RateLimiterConfig::min_size(1);
  config.seed = 1234;
  return config;
}

std::unique_ptr<Table> make_table(const TableConfig& config) {
  auto table = Table::create(config);
  INFO((table.ok() ? std::string() : table.error().message));
  REQUIRE(table.ok());
  return std::move(table).value();
}

// Applies `count` pseudo-random operations (inserts with and without priorities, samples,
// priority updates, deletes, some of stale keys) chosen by `seed`, and logs every outcome.
// Two tables in the same state produce the same log.
std::vector<std::uint64_t> run_workload(Table& table, std::uint64_t seed, int count) {
  Rng ops(seed);
  std::vector<std::uint64_t> log;
  std::vector<std::uint64_t> keys_seen;
  std::int64_t next_id = 1000 * static_cast<std::int64_t>(seed);
  for (int step = 0; step < count; ++step) {
    const auto op = ops.uniform_below(10);
    if (op < 4) {
      const auto n = 1 + ops.uniform_below(5);
      std::vector<std::int64_t> ids(n);
      std::vector<float> obs(3 * n);
      for (std::uint64_t i = 0; i < n; ++i) {
        ids[i] = next_id++;
        for (int j = 0; j < 3; ++j)
          obs[3 * i + j] = static_cast<float>(ids[i]) * 0.5f + j;
      }
      std::vector<double> priorities;
      if (ops.uniform_below(2) == 0) {
        for (std::uint64_t i = 0; i < n; ++i)
          priorities.push_back(ops.uniform_double() * 3);
      }
      std::vector<std::span<const std::byte>> columns{std::as_bytes(std::span(ids)),
                                                      std::as_bytes(std::span(obs))};
      std::vector<std::uint64_t> keys(n);
      const Status status = table.insert(columns, n, priorities, keys);
      log.push_back(status.ok());
      if (status.ok()) {
        log.insert(log.end(), keys.begin(), keys.end());
        keys_seen.insert(keys_seen.end(), keys.begin(), keys.end());
      }
    } else if (op < 7) {
      const auto n = 1 + ops.uniform_below(4);
      std::vector<std::uint64_t> keys(n);
      std::vector<double> probabilities(n), weights(n);
      std::vector<std::uint32_t> times(n);
      std::vector<std::int64_t> ids(n);
      std::vector<float> obs(3 * n);
      std::vector<std::span<std::byte>> columns{std::as_writable_bytes(std::span(ids)),
                                                std::as_writable_bytes(std::span(obs))};
      const Status status =
          table.sample(n, 0.5, SampleBuffers{keys, probabilities, weights, times, columns});
      log.push_back(status.ok());
      if (status.ok()) {
        for (std::uint64_t i = 0; i < n; ++i) {
          log.push_back(keys[i]);
          log.push_back(std::bit_cast<std::uint64_t>(probabilities[i]));
          log.push_back(std::bit_cast<std::uint64_t>(weights[i]));
          log.push_back(times[i]);
          log.push_back(static_cast<std::uint64_t>(ids[i]));
          REQUIRE(obs[3 * i + 2] == static_cast<float>(ids[i]) * 0.5f + 2);
        }
      }
    } else if (op < 9 && !keys_seen.empty()) {
      const std::vector<std::uint64_t> keys{keys_seen[ops.uniform_below(keys_seen.size())]};
      const std::vector<double> priorities{ops.uniform_below(4) == 0 ? 0.0
                                                                     : ops.uniform_double() * 5};
      auto outcome = table.update_priorities(keys, priorities);
      REQUIRE(outcome.ok());
      log.push_back(outcome->applied);
    } else if (!keys_seen.empty()) {
      const std::vector<std::uint64_t> keys{keys_seen[ops.uniform_below(keys_seen.size())]};
      log.push_back(table.delete_keys(keys).deleted);
    }
  }
  const TableInfo info = table.info();
  for (auto value : {info.size, info.counters.inserts, info.counters.samples,
                     info.counters.evictions, info.counters.expirations, info.rate_limiter.inserts,
                     info.rate_limiter.samples, info.rate_limiter.deletes}) {
    log.push_back(value);
  }
  return log;
}

std::vector<std::byte> image_of(std::vector<const Table*> tables) {
  MemorySink sink;
  auto stats = write_snapshot(tables, 1700000000000, sink);
  REQUIRE(stats.ok());
  REQUIRE(stats->bytes == sink.data().size());
  return sink.data();
}

Result<DecodedSnapshot> decode(const std::vector<std::byte>& image, SnapshotLimits limits = {}) {
  MemorySource source(image);
  return read_snapshot(source, limits);
}

std::unique_ptr<Table> restore_one(const std::vector<std::byte>& image) {
  auto decoded = decode(image);
  INFO((decoded.ok() ? std::string() : decoded.error().message));
  REQUIRE(decoded.ok());
  REQUIRE(decoded->tables.size() == 1);
  return std::move(decoded->tables[0]);
}

// A sink that, once the first section of the items stream goes out, does what the server
// does to a slot it reuses while a forked child writes the image from shared memory: it
// turns the stamps of `slots` to 0 (busy) and scribbles over their bytes.
class OverwritingSink final : public SnapshotSink {
 public:
  OverwritingSink(const Table& table, std::vector<std::uint32_t> slots)
      : table_(table), slots_(std::move(slots)) {}
  Status write(std::span<const std::byte> bytes) override {
    if (!done_ && bytes.size() >= 4 && std::memcmp(bytes.data(), "TITM", 4) == 0) {
      done_ = true;
      const Storage& storage = table_.storage();
      std::byte* block = storage.memory().bytes().data();
      for (auto slot : slots_) {
        std::memset(block + storage.layout().stamps_offset + 8 * slot, 0, 8);
        for (std::size_t f = 0; f < table_.schema().size(); ++f) {
          std::memset(block + storage.layout().column_offsets[f] + slot * storage.item_bytes(f),
                      0xab, storage.item_bytes(f));
        }
      }
    }
    return inner_.write(bytes);
  }
  const std::vector<std::byte>& data() const { return inner_.data(); }

 private:
  const Table& table_;
  std::vector<std::uint32_t> slots_;
  bool done_ = false;
  MemorySink inner_;
};

TEST_CASE("an image drops the items whose bytes changed while it was written, and only those") {
  auto config = config_of(SelectorKind::uniform, SelectorKind::fifo, 0);
  config.capacity = 60000;  // 40-byte rows: the items stream fills a 1 MiB section early
  auto table = make_table(config);
  std::vector<std::int64_t> ids(config.capacity);
  std::vector<float> obs(3 * ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<std::int64_t>(i);
    for (int j = 0; j < 3; ++j)
      obs[3 * i + j] = static_cast<float>(i) + j;
  }
  std::vector<std::span<const std::byte>> columns{std::as_bytes(std::span(ids)),
                                                  std::as_bytes(std::span(obs))};
  std::vector<std::uint64_t> keys(ids.size());
  REQUIRE(table->insert(columns, ids.size(), {}, keys).ok());
  // The 100 newest items come last in the stream (FIFO remover order), after the first
  // section of items has gone out.
  std::vector<std::uint32_t> overwritten;
  std::set<std::uint64_t> lost_keys;
  for (std::size_t i = ids.size() - 100; i < ids.size(); ++i) {
    overwritten.push_back(*table->storage().find(keys[i]));
    lost_keys.insert(keys[i]);
  }
  OverwritingSink sink(*table, overwritten);
  auto stats = write_snapshot(std::vector<const Table*>{table.get()}, 1700000000000, sink);
  REQUIRE(stats.ok());
  CHECK(stats->items == ids.size() - 100);  // what the image restores
  CHECK(stats->items_dropped == 100);

  auto restored = restore_one(sink.data());
  CHECK(restored->size() == ids.size() - 100);
  CHECK(restored->info().counters.evictions == 100);
  CHECK(restored->info().rate_limiter.deletes == 100);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto slot = restored->storage().find(keys[i]);
    REQUIRE(slot.has_value() == (lost_keys.count(keys[i]) == 0));
    if (!slot) continue;
    std::int64_t id = 0;
    std::memcpy(&id, restored->storage().cell(0, *slot), 8);
    REQUIRE(id == ids[i]);
    REQUIRE(restored->storage().stamp_holds_key(*slot));
  }
  // Written again, nothing is lost.
  auto again = restore_one(image_of({restored.get()}));
  CHECK(again->size() == ids.size() - 100);
}

TEST_CASE("a restored table samples, evicts and issues keys exactly as the original") {
  const auto sampler =
      GENERATE(SelectorKind::uniform, SelectorKind::prioritized, SelectorKind::fifo,
               SelectorKind::lifo, SelectorKind::max_heap, SelectorKind::min_heap);
  const auto remover =
      GENERATE(SelectorKind::fifo, SelectorKind::lifo, SelectorKind::uniform,
               SelectorKind::prioritized, SelectorKind::max_heap, SelectorKind::min_heap);
  const std::uint32_t max_times = GENERATE(0u, 3u);
  CAPTURE(selector_kind_name(sampler), selector_kind_name(remover), max_times);

  auto original = make_table(config_of(sampler, remover, max_times));
  run_workload(*original, 1, 200);  // a history with evictions, deletes and stale keys
  auto restored = restore_one(image_of({original.get()}));

  CHECK(restored->config().seed == original->config().seed);
  CHECK(restored->info().counters == original->info().counters);
  CHECK(restored->info().rate_limiter == original->info().rate_limiter);
  CHECK(restored->rng().state() == original->rng().state());
  // The same operations from here on give the same keys, samples and counters.
  CHECK(run_workload(*restored, 2, 300) == run_workload(*original, 2, 300));
}

TEST_CASE("a restored table writes a snapshot identical to the original's") {
  const auto sampler =
      GENERATE(SelectorKind::uniform, SelectorKind::prioritized, SelectorKind::fifo,
               SelectorKind::lifo, SelectorKind::max_heap, SelectorKind::min_heap);
  auto original = make_table(config_of(sampler, SelectorKind::uniform, 0));
  run_workload(*original, 3, 150);
  const auto image = image_of({original.get()});
  auto restored = restore_one(image);
  CHECK(image_of({restored.get()}) == image);
}

TEST_CASE("a restored ratio rate limiter admits and blocks exactly as the original") {
  auto config = config_of(SelectorKind::uniform, SelectorKind::fifo, 0);
  config.rate_limiter = RateLimiterConfig::sample_to_insert_ratio(2.0, 4, 6.0);
  auto original = make_table(config);
  run_workload(*original, 4, 60);
  auto restored = restore_one(image_of({original.get()}));
  for (std::uint64_t n = 1; n <= 8; ++n) {
    CHECK(restored->may_insert(n) == original->may_insert(n));
    CHECK(restored->may_sample(n) == original->may_sample(n));
  }
  CHECK(run_workload(*restored, 5, 200) == run_workload(*original, 5, 200));
}

TEST_CASE("an image holds several tables in order, with their counts") {
  auto a = make_table(config_of(SelectorKind::fifo, SelectorKind::fifo, 0, "a"));
  auto b = make_table(config_of(SelectorKind::prioritized, SelectorKind::lifo, 0, "b"));
  auto empty = make_table(config_of(SelectorKind::uniform, SelectorKind::uniform, 0, "empty"));
  run_workload(*a, 6, 40);
  run_workload(*b, 7, 40);
  auto decoded = decode(image_of({a.get(), b.get(), empty.get()}));
  REQUIRE(decoded.ok());
  REQUIRE(decoded->tables.size() == 3);
  CHECK(decoded->tables[0]->name() == "a");
  CHECK(decoded->tables[1]->name() == "b");
  CHECK(decoded->tables[2]->size() == 0);
  CHECK(decoded->stats.tables == 3);
  CHECK(decoded->stats.items == a->size() + b->size());
  CHECK(decoded->created_unix_ms == 1700000000000);
}

// --- damaged images ---------------------------------------------------------------------

struct Section {
  std::size_t offset;
  std::uint32_t tag;
  std::vector<std::byte> payload;
};

std::vector<Section> sections_of(const std::vector<std::byte>& image) {
  std::vector<Section> sections;
  std::size_t at = kSnapshotHeaderBytes;
  while (at < image.size()) {
    std::uint32_t tag = 0, length = 0;
    std::memcpy(&tag, image.data() + at, 4);
    std::memcpy(&length, image.data() + at + 4, 4);
    const auto* payload = image.data() + at + kSectionHeaderBytes;
    sections.push_back(Section{at, tag, std::vector<std::byte>(payload, payload + length)});
    at += kSectionHeaderBytes + length;
  }
  REQUIRE(at == image.size());
  return sections;
}

// Re-encodes an image from its sections with valid checksums.
std::vector<std::byte> rebuild(const std::vector<std::byte>& image,
                               const std::vector<Section>& sections) {
  MemorySink sink;
  REQUIRE(sink.write(std::span(image).first(kSnapshotHeaderBytes)).ok());
  SectionWriter writer(sink);
  for (const auto& section : sections)
    REQUIRE(writer.section(section.tag, section.payload).ok());
  return sink.data();
}

// A table with evictions, expirations, deletes and some free slots.
std::vector<std::byte> sample_image() {
  auto table = make_table(config_of(SelectorKind::prioritized, SelectorKind::fifo, 3));
  run_workload(*table, 8, 60);
  for (std::uint32_t slot = 0; slot < 3; ++slot) {
    const std::vector<std::uint64_t> key{table->storage().key(slot)};
    if (table->storage().occupied(slot)) table->delete_keys(key);
  }
  return image_of({table.get()});
}

std::string rejection(const std::vector<std::byte>& image) {
  auto decoded = decode(image);
  REQUIRE_FALSE(decoded.ok());
  REQUIRE_FALSE(decoded.error().message.empty());
  return decoded.error().message;
}

TEST_CASE("an image truncated at any section boundary or byte is rejected as truncated") {
  const auto image = sample_image();
  for (const auto& section : sections_of(image)) {
    for (std::size_t cut :
         {section.offset, section.offset + 5, section.offset + kSectionHeaderBytes,
          section.offset + kSectionHeaderBytes + section.payload.size() / 2}) {
      if (cut >= image.size()) continue;
      CAPTURE(cut, section_tag_name(section.tag));
      CHECK_THAT(rejection(std::vector(image.begin(), image.begin() + cut)), Contains("truncated"));
    }
  }
  for (std::size_t cut = 0; cut < image.size(); ++cut) {
    CAPTURE(cut);
    rejection(std::vector(image.begin(), image.begin() + cut));
  }
}

TEST_CASE("an image with any byte changed is rejected") {
  const auto image = sample_image();
  Rng rng(9);
  for (std::size_t i = 0; i < image.size(); ++i) {
    auto damaged = image;
    damaged[i] ^= std::byte(1 + rng.uniform_below(255));
    CAPTURE(i);
    rejection(damaged);
  }
  auto damaged = image;
  damaged[sections_of(image)[3].offset + kSectionHeaderBytes] ^= std::byte{1};
  CHECK_THAT(rejection(damaged), Contains("checksum mismatch"));
}

TEST_CASE("an image with trailing bytes after its end section is rejected") {
  auto image = sample_image();
  image.push_back(std::byte{0});
  CHECK_THAT(rejection(image), Contains("after the end section"));
}

TEST_CASE("a file that is not a snapshot, or of an unknown version, is rejected by name") {
  auto image = sample_image();
  auto not_snapshot = image;
  not_snapshot[0] = std::byte{'X'};
  CHECK_THAT(rejection(not_snapshot), Contains("not a replayd snapshot"));

  const std::uint32_t version = kSnapshotVersion + 1;
  std::memcpy(image.data() + 8, &version, 4);
  const std::uint32_t crc = crc32c(std::span(image).first(12));
  std::memcpy(image.data() + 12, &crc, 4);
  CHECK_THAT(rejection(image),
             Contains("unknown snapshot format version " + std::to_string(version)));
}

TEST_CASE("a section longer than the limit is rejected before its payload is allocated") {
  auto image = sample_image();
  const auto at = sections_of(image)[1].offset;  // the table's configuration
  const std::uint32_t huge = 0xfffffff0u;
  std::memcpy(image.data() + at + 4, &huge, 4);
  const std::uint32_t crc = crc32c(std::span(image).subspan(at, 12));
  std::memcpy(image.data() + at + 12, &crc, 4);
  CHECK_THAT(rejection(image), Contains("exceeds the limit"));
}

TEST_CASE("an image over max_tables or a table over max_table_bytes is rejected") {
  const auto image = sample_image();
  auto too_many = decode(image, SnapshotLimits{0, std::uint64_t{1} << 30});
  REQUIRE_FALSE(too_many.ok());
  CHECK_THAT(too_many.error().message, Contains("max_tables"));
  auto too_big = decode(image, SnapshotLimits{8, 64});
  REQUIRE_FALSE(too_big.ok());
  CHECK_THAT(too_big.error().message, Contains("exceeding max_table_bytes = 64 bytes"));
}

// Values that checksums cannot catch (written by a buggy or hostile writer) are still
// checked against the table's invariants.
TEST_CASE("an image whose values break the table's invariants is rejected with the reason") {
  const auto image = sample_image();
  auto sections = sections_of(image);
  const auto find = [&](const char(&tag)[5]) -> Section& {
    for (auto& section : sections) {
      if (section.tag == section_tag(tag)) return section;
    }
    FAIL("no section " << tag);
    return sections[0];
  };
  SECTION("rate limiter counters that disagree with the size") {
    auto& state = find("TSTA").payload;
    state[8 + 8 * 8] ^= std::byte{4};  // rate limiter inserts
    CHECK_THAT(rejection(rebuild(image, sections)), Contains("disagree with size"));
  }
  SECTION("an all-zero RNG state") {
    auto& state = find("TSTA").payload;
    std::fill(state.begin() + 8 + 11 * 8, state.begin() + 8 + 15 * 8, std::byte{0});
    CHECK_THAT(rejection(rebuild(image, sections)), Contains("RNG state is all zero"));
  }
  SECTION("an item listed twice") {
    auto& items = find("TITM").payload;
    const std::size_t row = 20 + 8 + 12;
    REQUIRE(items.size() >= 2 * row);
    std::memcpy(items.data() + row, items.data(), 8);
    CHECK_THAT(rejection(rebuild(image, sections)), Contains("listed twice"));
  }
  SECTION("a priority that is not a number") {
    auto& items = find("TITM").payload;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::memcpy(items.data() + 8, &nan, 8);
    CHECK_THAT(rejection(rebuild(image, sections)), Contains("not finite"));
  }
  SECTION("a free slot listed twice") {
    auto& free_slots = find("TFRE").payload;
    REQUIRE(free_slots.size() >= 8);
    std::memcpy(free_slots.data() + 4, free_slots.data(), 4);
    CHECK_THAT(rejection(rebuild(image, sections)), Contains("listed twice"));
  }
  SECTION("an unknown dtype code") {
    auto& config = find("TCFG").payload;
    // name "replay" (4 + 6), capacity, field count, field name "id" (4 + 2), then the dtype.
    config[4 + 6 + 4 + 4 + 4 + 2] = std::byte{200};
    CHECK_THAT(rejection(rebuild(image, sections)), Contains("unknown dtype code 200"));
  }
}

// --- failing I/O ------------------------------------------------------------------------

class FailingSink final : public SnapshotSink {
 public:
  explicit FailingSink(std::size_t fail_after_bytes) : room_(fail_after_bytes) {}
  Status write(std::span<const std::byte> bytes) override {
    if (bytes.size() > room_)
      return make_error(ErrorCode::resource_exhausted, "no space left on device");
    room_ -= bytes.size();
    return Ok{};
  }

 private:
  std::size_t room_;
};

class FailingSource final : public SnapshotSource {
 public:
  FailingSource(std::span<const std::byte> data, std::size_t fail_after_bytes)
      : inner_(data), room_(fail_after_bytes) {}
  Result<std::size_t> read(std::span<std::byte> out) override {
    if (out.size() > room_) return make_error(ErrorCode::failed_precondition, "input/output error");
    room_ -= out.size();
    return inner_.read(out);
  }

 private:
  MemorySource inner_;
  std::size_t room_;
};

TEST_CASE("a sink that fails at any point makes write_snapshot report its error") {
  auto table = make_table(config_of(SelectorKind::uniform, SelectorKind::fifo, 0));
  run_workload(*table, 10, 50);
  const std::vector<const Table*> tables{table.get()};
  const auto size = image_of(tables).size();
  for (std::size_t room = 0; room < size; room += 7) {
    FailingSink sink(room);
    auto result = write_snapshot(tables, 0, sink);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().message == "no space left on device");
  }
  FailingSink enough(size);
  CHECK(write_snapshot(tables, 0, enough).ok());
}

TEST_CASE("a source that fails at any point makes read_snapshot report its error") {
  const auto image = sample_image();
  for (std::size_t room = 0; room < image.size(); room += 11) {
    FailingSource source(image, room);
    auto result = read_snapshot(source, {});
    REQUIRE_FALSE(result.ok());
    CHECK_THAT(result.error().message, Contains("input/output error"));
  }
}

// An image of a prioritized table (capacity 4, ids 1..5 inserted with priorities 1..5, so
// id 1 evicted) written by the code before episodic tables existed.
constexpr const char* kImageBeforeEpisodes =
    "52504c59534e415001000000788c432a46494e4610000000e743e52484fb28d601000000000000000068e5cf8b0100"
    "00"
    "54434647560000004d4e4512cfdb306c030000006f6c6404000000020000000200000069640400030000007265770a"
    "00"
    "01000000000000e03f0200000000000000000000f03f0100000000000000000000000000f0ff000000000000f07f4d"
    "00"
    "0000000000005453544188000000874a15685d3871b304000000000000000500000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000100000000000000000000000000000005"
    "00"
    "0000000000000000000000000000010000000000000081f01f7ce0cb5862549e963a88a4547eec46752820b64a8cbb"
    "69"
    "026917b06b3200000000000014405447454e200000006b25a3f0763dc2f90200000000000000010000000000000001"
    "00"
    "00000000000001000000000000005449544d80000000829a0950351eb1810500000000000000000000000000004000"
    "00"
    "000002000000000000000000c03f060000000000000000000000000008400000000003000000000000000000204007"
    "00"
    "0000000000000000000000001040000000000400000000000000000060400800000000000000000000000000144000"
    "00"
    "00000500000000000000000090405453414d1000000067d481f20eb58f0d0300000001000000020000000000000046"
    "45"
    "4e441000000079156191ed89861c01000000000000000400000000000000";

TEST_CASE("a table's metadata and run-time settings survive an image") {
  auto config = config_of(SelectorKind::prioritized, SelectorKind::fifo, 0);
  config.metadata = R"({"observation_space": {"type": "Box", "shape": [17]}})";
  auto table = make_table(config);
  REQUIRE(table->set_priority_exponent(0.25).ok());
  const auto ratio = RateLimiterConfig::sample_to_insert_ratio(3.0, 1, 9.0);
  REQUIRE(table->set_rate_limiter(ratio).ok());
  auto restored = restore_one(image_of({table.get()}));
  CHECK(restored->config().metadata == config.metadata);
  CHECK(restored->config().sampler.priority_exponent == 0.25);
  CHECK(restored->config().rate_limiter == ratio);
}

TEST_CASE("an image of format version 1 (before episodic tables) loads, and re-encodes stably") {
  const std::string hex = kImageBeforeEpisodes;
  std::vector<std::byte> image(hex.size() / 2);
  for (std::size_t i = 0; i < image.size(); ++i)
    image[i] = static_cast<std::byte>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  auto restored = restore_one(image);
  CHECK_FALSE(restored->episodic());
  CHECK(restored->size() == 4);
  CHECK(restored->config().seed == 77);
  // Written again it is a current image (an empty lost-items list, no metadata), which
  // reads back to a table that encodes to the same bytes.
  const auto rewritten = image_of({restored.get()});
  CHECK(rewritten != image);
  auto again = restore_one(rewritten);
  CHECK(again->size() == 4);
  CHECK(image_of({again.get()}) == rewritten);
}

}  // namespace
}  // namespace replayd
