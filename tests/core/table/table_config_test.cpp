// Tests for core/table/table_config.*: validate_table_config refuses every documented mistake
// with a message naming the key at fault, and table_bytes() counts what a table allocates.
#include "core/table/table_config.h"

#include <catch2/catch.hpp>

#include <string>

#include "core/storage/blob_column.h"
#include "core/storage/storage.h"
#include "core/storage/zstd_value.h"

namespace replayd {
namespace {

using Catch::Contains;

constexpr std::uint64_t kPlenty = std::uint64_t{1} << 40;

Schema schema_of(std::vector<Field> fields) {
  auto schema = Schema::create(std::move(fields));
  REQUIRE(schema.ok());
  return schema.value();
}

TableConfig plain_config() {
  TableConfig config;
  config.name = "replay";
  config.schema = schema_of({Field{"obs", DType::float32, {4}}, Field{"act", DType::int64, {}}});
  config.capacity = 100;
  return config;
}

TableConfig episodic_config() {
  TableConfig config;
  config.name = "episodes";
  config.schema = schema_of({Field{"obs", DType::uint8, {8}}, Field{"rew", DType::float32, {}},
                             Field{"next_obs", DType::uint8, {8}}});
  config.capacity = 50;
  config.episodes.enabled = true;
  return config;
}

Field frame_field(std::string name) {
  Field field{std::move(name), DType::uint8, {4, 4}};
  field.stack = 4;
  return field;
}

TEST_CASE("a plain table with a name, fields and a capacity is valid") {
  CHECK(validate_table_config(plain_config(), kPlenty).ok());
}

TEST_CASE("an episodic table with a reward and bootstrap field is valid") {
  CHECK(validate_table_config(episodic_config(), kPlenty).ok());
  auto prioritized = episodic_config();
  prioritized.sampler.kind = SelectorKind::prioritized;
  CHECK(validate_table_config(prioritized, kPlenty).ok());
}

TEST_CASE("table names are 1 to 64 letters, digits, underscores, dots or dashes") {
  CHECK(is_valid_table_name("a"));
  CHECK(is_valid_table_name("Atari.Pong-v5_replay"));
  CHECK(is_valid_table_name(std::string(64, 'x')));
  CHECK_FALSE(is_valid_table_name(""));
  CHECK_FALSE(is_valid_table_name(std::string(65, 'x')));
  CHECK_FALSE(is_valid_table_name("has space"));
  CHECK_FALSE(is_valid_table_name("slash/name"));
  CHECK_FALSE(is_valid_table_name("caf\xc3\xa9"));
}

TEST_CASE("a bad table name is refused with the naming rule") {
  auto config = plain_config();
  config.name = "bad name";
  auto status = validate_table_config(config, kPlenty);
  REQUIRE_FALSE(status);
  CHECK(status.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(status.error().message, Contains("table 'bad name'") && Contains("name must be"));
}

TEST_CASE("a table without fields is refused") {
  auto config = plain_config();
  config.schema = Schema{};
  auto status = validate_table_config(config, kPlenty);
  REQUIRE_FALSE(status);
  CHECK(status.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(status.error().message, Contains("fields") && Contains("no fields"));
}

TEST_CASE("capacity must be between 1 and 2^31") {
  auto config = plain_config();
  config.capacity = 0;
  auto zero = validate_table_config(config, kPlenty);
  REQUIRE_FALSE(zero);
  CHECK(zero.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(zero.error().message, Contains("capacity") && Contains("got 0"));

  config.capacity = Storage::kMaxCapacity + 1;
  auto huge = validate_table_config(config, UINT64_MAX);
  REQUIRE_FALSE(huge);
  CHECK_THAT(huge.error().message,
             Contains("capacity") && Contains(std::to_string(Storage::kMaxCapacity + 1)));

  config.capacity = 1;
  CHECK(validate_table_config(config, kPlenty).ok());
}

TEST_CASE("a table larger than max_table_bytes is resource_exhausted with its bytes per part") {
  auto config = plain_config();
  const auto needed = table_bytes(config).total();
  REQUIRE(needed <= UINT64_MAX);
  const auto exact = static_cast<std::uint64_t>(needed);
  CHECK(validate_table_config(config, exact).ok());  // the limit itself is allowed
  auto status = validate_table_config(config, exact - 1);
  REQUIRE_FALSE(status);
  CHECK(status.error().code == ErrorCode::resource_exhausted);
  CHECK_THAT(status.error().message,
             Contains("capacity 100") && Contains("needs " + std::to_string(exact) + " bytes") &&
                 Contains("sampler") && Contains("remover") && Contains("slot metadata") &&
                 Contains("max_table_bytes = " + std::to_string(exact - 1)));
}

TEST_CASE("min_size_to_sample above the capacity is refused because sampling could never start") {
  auto config = plain_config();
  config.rate_limiter.min_size_to_sample = 100;
  CHECK(validate_table_config(config, kPlenty).ok());
  config.rate_limiter.min_size_to_sample = 101;
  auto status = validate_table_config(config, kPlenty);
  REQUIRE_FALSE(status);
  CHECK(status.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(status.error().message, Contains("rate_limiter.min_size_to_sample (101)") &&
                                         Contains("capacity (100)") && Contains("never start"));
}

TEST_CASE("frame fields are refused in a table that is not episodic") {
  auto config = plain_config();
  config.schema = schema_of({Field{"obs", DType::float32, {4}}, frame_field("frames")});
  auto status = validate_table_config(config, kPlenty);
  REQUIRE_FALSE(status);
  CHECK(status.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(status.error().message, Contains("field 'frames'") && Contains("episodic"));
}

TEST_CASE("max_compressed_bytes is refused when the table has no compressed field") {
  auto plain = plain_config();
  plain.max_compressed_bytes = 1000;
  auto status = validate_table_config(plain, kPlenty);
  REQUIRE_FALSE(status);
  CHECK_THAT(status.error().message, Contains("max_compressed_bytes") && Contains("no compressed"));

  auto episodic = episodic_config();
  episodic.max_compressed_bytes = 1000;
  auto episodic_status = validate_table_config(episodic, kPlenty);
  REQUIRE_FALSE(episodic_status);
  CHECK_THAT(episodic_status.error().message, Contains("max_compressed_bytes"));
}

TEST_CASE("an episodic table must sample uniformly or by priority") {
  for (SelectorKind kind :
       {SelectorKind::fifo, SelectorKind::lifo, SelectorKind::max_heap, SelectorKind::min_heap}) {
    auto config = episodic_config();
    config.sampler.kind = kind;
    auto status = validate_table_config(config, kPlenty);
    REQUIRE_FALSE(status);
    CHECK(status.error().code == ErrorCode::invalid_argument);
    CHECK_THAT(status.error().message,
               Contains("sampler") && Contains(std::string(selector_kind_name(kind))));
  }
}

TEST_CASE("an episodic table's reward field must exist and be a scalar float") {
  auto missing = episodic_config();
  missing.episodes.reward_field = "reward";
  auto status = validate_table_config(missing, kPlenty);
  REQUIRE_FALSE(status);
  CHECK_THAT(status.error().message,
             Contains("episodes.reward_field") && Contains("no field named 'reward'"));

  auto vector_reward = episodic_config();
  vector_reward.episodes.reward_field = "obs";
  auto wrong = validate_table_config(vector_reward, kPlenty);
  REQUIRE_FALSE(wrong);
  CHECK_THAT(wrong.error().message,
             Contains("episodes.reward_field") && Contains("'obs'") && Contains("scalar"));

  auto int_reward = episodic_config();
  int_reward.schema =
      schema_of({Field{"rew", DType::int32, {}}, Field{"next_obs", DType::uint8, {8}}});
  CHECK_FALSE(validate_table_config(int_reward, kPlenty));

  auto f64_reward = episodic_config();
  f64_reward.schema =
      schema_of({Field{"rew", DType::float64, {}}, Field{"next_obs", DType::uint8, {8}}});
  CHECK(validate_table_config(f64_reward, kPlenty).ok());
}

TEST_CASE("an episodic table's bootstrap fields must exist and not be frame fields") {
  auto missing = episodic_config();
  missing.episodes.bootstrap_fields = {"next_obs", "next_state"};
  auto status = validate_table_config(missing, kPlenty);
  REQUIRE_FALSE(status);
  CHECK_THAT(status.error().message,
             Contains("episodes.bootstrap_fields") && Contains("no field named 'next_state'"));

  auto frame = episodic_config();
  frame.schema = schema_of({Field{"rew", DType::float32, {}}, frame_field("pixels")});
  frame.episodes.bootstrap_fields = {"pixels"};
  auto frame_status = validate_table_config(frame, kPlenty);
  REQUIRE_FALSE(frame_status);
  CHECK_THAT(frame_status.error().message,
             Contains("episodes.bootstrap_fields") && Contains("'pixels'") && Contains("frame"));

  auto none = episodic_config();
  none.episodes.bootstrap_fields = {};
  CHECK(validate_table_config(none, kPlenty).ok());
}

TEST_CASE("a next_of field may not collide with an existing next_ field") {
  auto config = episodic_config();
  Field obs{"obs", DType::uint8, {8}};
  obs.next_of = true;
  config.schema =
      schema_of({obs, Field{"rew", DType::float32, {}}, Field{"next_obs", DType::uint8, {8}}});
  config.episodes.bootstrap_fields = {};
  auto status = validate_table_config(config, kPlenty);
  REQUIRE_FALSE(status);
  CHECK_THAT(status.error().message, Contains("field 'obs'") && Contains("next_obs"));
}

TEST_CASE("table_bytes counts data, slot metadata, selectors and episode bookkeeping") {
  auto config = plain_config();
  const TableBytes plain = table_bytes(config);
  // The column block: a page of stamps (100 x 8 bytes), then each field's column from a page
  // boundary (storage_layout.h).
  const auto layout = StorageLayout::of(config.schema, 100);
  CHECK(plain.data == layout.total_bytes);
  CHECK(plain.data == 4096 * (1 + config.schema.size()));
  CHECK(plain.metadata == 100 * Storage::kMetadataBytesPerSlot);
  CHECK(plain.sampler == selector_bytes(SelectorKind::uniform, 100));
  CHECK(plain.remover == selector_bytes(SelectorKind::fifo, 100));
  CHECK(plain.episodes == 0);
  CHECK(plain.total() >= plain.data + plain.metadata + plain.sampler + plain.remover);

  const TableBytes episodic = table_bytes(episodic_config());
  CHECK(episodic.episodes >= 50 * kEpisodeBytesPerSlot);
}

TEST_CASE("an episodic table's budget counts a record for every episode it may hold") {
  // Every stored step may be an episode of its own, and writers may hold the table's
  // open episodes empty: both are counted against max_table_bytes.
  const auto config = episodic_config();
  const TableBytes bytes = table_bytes(config);
  CHECK(bytes.episodes >= std::uint64_t{config.capacity} * kEpisodeMemoryBytes +
                              kMaxOpenEpisodesPerTable * kEpisodeMemoryBytes);
}

TEST_CASE("the compressed budget defaults to a full table of the largest frames") {
  auto config = episodic_config();
  Field pixels{"pixels", DType::uint8, {16, 16}};
  pixels.compression = Compression::zstd;
  config.schema = schema_of({Field{"rew", DType::float32, {}}, pixels});
  config.episodes.bootstrap_fields = {};
  CHECK(compressed_budget(config) == 50 * BlobColumn::cost(max_zstd_frame_bytes(256)));
  const TableBytes bytes = table_bytes(config);
  // A page of stamps, a page for the 50 rewards, the compressed field's index and budget.
  CHECK(bytes.data ==
        2 * 4096 + 50 * BlobColumn::kIndexBytesPerSlot + uint128{compressed_budget(config)});
  CHECK(validate_table_config(config, kPlenty).ok());

  config.max_compressed_bytes = 1234;
  CHECK(compressed_budget(config) == 1234);
  CHECK(table_bytes(config).data == 2 * 4096 + 50 * BlobColumn::kIndexBytesPerSlot + 1234);
  CHECK(validate_table_config(config, kPlenty).ok());

  CHECK(compressed_budget(plain_config()) == 0);
}

}  // namespace
}  // namespace replayd
