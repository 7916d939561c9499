// Tests of service/table_description.h: strict parsing of a table description (config file
// and create_table), its resolved description that parses back to the same table, and the
// phrases that say how two configurations differ.
#include <catch2/catch.hpp>

#include <limits>

#include "core/storage/storage.h"
#include "service/table_description.h"

using namespace replayd;
using namespace replayd::service;
using Catch::Contains;

namespace {

namespace json = boost::json;

json::value doc(std::string_view text) {
  boost::system::error_code ec;
  auto value = json::parse(text, ec);
  REQUIRE_FALSE(ec);
  return value;
}

TableConfig parsed(std::string_view text, std::uint64_t default_seed = 77) {
  auto config = parse_table_description(doc(text), "tables[0]", default_seed);
  INFO((config ? std::string() : config.error().message));
  REQUIRE(config);
  return std::move(config).value();
}

std::string refusal(std::string_view text) {
  auto config = parse_table_description(doc(text), "tables[0]", 0);
  REQUIRE_FALSE(config);
  CHECK(config.error().code == ErrorCode::invalid_argument);
  return config.error().message;
}

constexpr std::string_view kMinimal =
    R"({"name": "replay", "capacity": 100, "fields": [{"name": "obs", "dtype": "float32"}]})";

// A table description with `key: value` added to the minimal one.
std::string with(std::string_view key_value) {
  std::string text(kMinimal);
  text.insert(text.size() - 1, std::string(", ") + std::string(key_value));
  return text;
}

// The minimal description with one field replaced.
std::string with_field(std::string_view field) {
  return R"({"name": "t", "capacity": 10, "fields": [)" + std::string(field) + "]}";
}

constexpr std::string_view kEpisodic = R"({
  "name": "atari", "capacity": 1000, "episodic": true, "reward": "r",
  "bootstrap": ["next_obs"], "pad_history": false, "seed": 5,
  "sampler": {"kind": "prioritized", "priority_exponent": 0.8}, "remover": "fifo",
  "max_times_sampled": 3,
  "rate_limiter": {"kind": "sample_to_insert_ratio", "samples_per_insert": 4,
                   "min_size_to_sample": 10, "error_buffer": 100},
  "fields": [{"name": "frames", "dtype": "uint8", "shape": [84, 84], "stack": 4,
              "compression": "zstd", "compression_level": 5},
             {"name": "r", "dtype": "float32"},
             {"name": "next_obs", "dtype": "float32", "shape": [2]},
             {"name": "act", "dtype": "int64", "shape": null}]
})";

}  // namespace

TEST_CASE("a minimal description gets the documented defaults") {
  const TableConfig config = parsed(kMinimal);
  CHECK(config.name == "replay");
  CHECK(config.capacity == 100);
  REQUIRE(config.schema.size() == 1);
  CHECK(config.schema.field(0).dtype == DType::float32);
  CHECK(config.schema.field(0).shape.empty());
  CHECK(config.sampler.kind == SelectorKind::uniform);
  CHECK(config.remover == SelectorKind::fifo);
  CHECK(config.max_times_sampled == 0);
  CHECK(config.rate_limiter == RateLimiterConfig{});
  CHECK(config.seed == 77);  // the default seed when none is given
  CHECK_FALSE(config.episodes.enabled);
  CHECK(config.episodes.bootstrap_fields.empty());  // no next_obs field
  CHECK(config.max_compressed_bytes == 0);
}

TEST_CASE("every key of a full description is read") {
  const TableConfig config = parsed(kEpisodic);
  CHECK(config.seed == 5);
  CHECK(config.sampler.kind == SelectorKind::prioritized);
  CHECK(config.sampler.priority_exponent == 0.8);
  CHECK(config.max_times_sampled == 3);
  CHECK(config.rate_limiter == RateLimiterConfig::sample_to_insert_ratio(4, 10, 100));
  CHECK(config.episodes.enabled);
  CHECK(config.episodes.reward_field == "r");
  CHECK(config.episodes.bootstrap_fields == std::vector<std::string>{"next_obs"});
  CHECK_FALSE(config.episodes.pad_history);
  const Field& frames = config.schema.field(0);
  CHECK(frames.shape == std::vector<std::uint64_t>{84, 84});
  CHECK(frames.stack == 4);
  CHECK(frames.compression == Compression::zstd);
  CHECK(frames.compression_level == 5);
  CHECK(config.schema.field(3).shape.empty());
}

TEST_CASE("a sampler may be a bare kind name and each rate limiter kind is understood") {
  CHECK(parsed(with(R"("sampler": "lifo")")).sampler.kind == SelectorKind::lifo);
  CHECK(parsed(with(R"("rate_limiter": {"kind": "min_size", "min_size_to_sample": 7})"))
            .rate_limiter == RateLimiterConfig::min_size(7));
  CHECK(parsed(with(R"("rate_limiter": {"kind": "queue", "size": 9})")).rate_limiter ==
        RateLimiterConfig::queue(9));
  const auto custom = parsed(with(R"("rate_limiter": {"kind": "custom", "samples_per_insert": 2,
                                     "min_size_to_sample": 3, "min_diff": -5, "max_diff": null})"))
                          .rate_limiter;
  CHECK(custom.samples_per_insert == 2);
  CHECK(custom.min_size_to_sample == 3);
  CHECK(custom.min_diff == -5);
  CHECK(custom.max_diff == std::numeric_limits<double>::infinity());
}

TEST_CASE("a description that is not an object or lacks a required key is refused by path") {
  auto not_object = parse_table_description(doc("[]"), "tables[3]", 0);
  REQUIRE_FALSE(not_object);
  CHECK_THAT(not_object.error().message, Contains("tables[3]: expected an object"));
  CHECK_THAT(refusal(R"({"capacity": 1, "fields": []})"), Contains("tables[0].name: is required"));
  CHECK_THAT(refusal(R"({"name": "t", "fields": []})"),
             Contains("tables[0].capacity: is required"));
  CHECK_THAT(refusal(R"({"name": "t", "capacity": 1})"),
             Contains("tables[0].fields: expected an array"));
}

TEST_CASE("an unknown key is refused by name, at the top and inside fields and samplers") {
  CHECK_THAT(refusal(with(R"("capacty": 5)")), Contains("tables[0].capacty: unknown key"));
  CHECK_THAT(refusal(with_field(R"({"name": "x", "dtype": "int8", "shap": [2]})")),
             Contains("tables[0].fields[0].shap: unknown key"));
  CHECK_THAT(refusal(with(R"("sampler": {"kind": "uniform", "priority_exponent": 1})")),
             Contains("tables[0].sampler.priority_exponent: unknown key"));
  CHECK_THAT(refusal(with(R"("rate_limiter": {"kind": "queue", "size": 2, "min_size": 1})")),
             Contains("tables[0].rate_limiter.min_size: unknown key"));
}

TEST_CASE("capacity must be between 1 and 2^31") {
  CHECK_THAT(refusal(R"({"name": "t", "capacity": 0, "fields": []})"),
             Contains("tables[0].capacity: must be between 1 and 2147483648"));
  CHECK_THAT(refusal(R"({"name": "t", "capacity": 2147483649, "fields": []})"),
             Contains("tables[0].capacity"));
  CHECK_THAT(refusal(R"({"name": "t", "capacity": -1, "fields": []})"),
             Contains("tables[0].capacity: expected a non-negative integer"));
  CHECK(
      parsed(R"({"name": "t", "capacity": 2147483648, "fields": [{"name": "x", "dtype": "int8"}]})")
          .capacity == Storage::kMaxCapacity);
}

TEST_CASE("a bad field is refused with its index and the rule it breaks") {
  CHECK_THAT(refusal(with_field(R"({"name": "x", "dtype": "float128"})")),
             Contains("tables[0].fields[0].dtype: unknown dtype 'float128'"));
  CHECK_THAT(refusal(with_field(R"({"name": "x", "dtype": "int8", "shape": 4})")),
             Contains("fields[0].shape: expected an array"));
  CHECK_THAT(refusal(with_field(R"({"name": "x", "dtype": "int8", "shape": [2, 0]})")),
             Contains("fields[0].shape: dimensions must be integers >= 1"));
  CHECK_THAT(refusal(with_field(R"({"name": "x", "dtype": "int8", "shape": [1,1,1,1,1,1,1,1,1]})")),
             Contains("fields[0].shape: more than 8 dimensions"));
  CHECK_THAT(refusal(with_field(R"({"name": "x", "dtype": "int8", "stack": 0})")),
             Contains("fields[0].stack: must be between 1 and 64"));
  CHECK_THAT(refusal(with_field(R"({"name": "x", "dtype": "int8", "stack": 65})")),
             Contains("fields[0].stack"));
  CHECK_THAT(refusal(with_field(R"({"name": "x", "dtype": "int8", "compression": "lz4"})")),
             Contains("fields[0].compression: unknown compression 'lz4'"));
  CHECK_THAT(refusal(with_field(R"({"name": "x", "dtype": "int8", "compression_level": 20})")),
             Contains("fields[0].compression_level: must be between 1 and 19"));
  CHECK_THAT(refusal(with_field(R"({"name": "x", "dtype": "int8", "next_of": "yes"})")),
             Contains("fields[0].next_of: expected true or false"));
}

TEST_CASE("a schema the engine refuses is reported under fields") {
  CHECK_THAT(refusal(R"({"name": "t", "capacity": 1, "fields": []})"),
             Contains("tables[0].fields: schema has no fields"));
  CHECK_THAT(
      refusal(with_field(R"({"name": "x", "dtype": "int8"}, {"name": "x", "dtype": "int8"})")),
      Contains("tables[0].fields") && Contains("'x' appears more than once"));
}

TEST_CASE("bad sampler, remover and rate limiter values are refused by key") {
  CHECK_THAT(refusal(with(R"("sampler": {"kind": "random"})")),
             Contains("tables[0].sampler.kind") && Contains("unknown selector 'random'"));
  CHECK_THAT(refusal(with(R"("sampler": {"kind": "prioritized", "priority_exponent": -1})")),
             Contains("sampler.priority_exponent: must be finite and >= 0"));
  CHECK_THAT(refusal(with(R"("remover": "oldest")")),
             Contains("tables[0].remover") && Contains("unknown selector 'oldest'"));
  CHECK_THAT(refusal(with(R"("max_times_sampled": 4294967296)")),
             Contains("max_times_sampled: must be < 2^32"));
  CHECK_THAT(refusal(with(R"("rate_limiter": {"kind": "fast"})")),
             Contains("rate_limiter.kind: unknown rate limiter 'fast'"));
  CHECK_THAT(refusal(with(R"("rate_limiter": {"kind": "min_size", "min_size_to_sample": 0})")),
             Contains("rate_limiter.min_size_to_sample: must be between 1 and 2^40"));
  CHECK_THAT(refusal(with(R"("rate_limiter": {"kind": "queue", "size": 0})")),
             Contains("rate_limiter.size: must be between 1 and 2^40"));
  CHECK_THAT(refusal(with(R"("rate_limiter": {"kind": "sample_to_insert_ratio",
                                              "samples_per_insert": 1, "error_buffer": -1})")),
             Contains("rate_limiter.error_buffer: must be finite and >= 0"));
  CHECK_THAT(refusal(with(R"("rate_limiter": {"kind": "sample_to_insert_ratio",
                                              "error_buffer": 1})")),
             Contains("rate_limiter.samples_per_insert: is required"));
}

TEST_CASE("an unknown sampler given as a bare name is refused naming the sampler key") {
  // The object form names "tables[0].sampler.kind"; the bare-name form should name the key too.
  CHECK_THAT(refusal(with(R"("sampler": "random")")),
             Contains("tables[0].sampler") && Contains("unknown selector 'random'"));
}

TEST_CASE("episode keys need \"episodic\": true") {
  CHECK_THAT(refusal(with(R"("reward": "obs")")), Contains("tables[0].reward: needs \"episodic\""));
  CHECK_THAT(refusal(with(R"("bootstrap": ["obs"])")), Contains("tables[0].bootstrap: needs"));
  CHECK_THAT(refusal(with(R"("pad_history": false)")), Contains("tables[0].pad_history: needs"));
  CHECK(parsed(with(R"("pad_history": true)")).episodes.pad_history);
  CHECK_THAT(refusal(with(R"("episodic": true, "bootstrap": "obs")")),
             Contains("bootstrap: expected an array of field names"));
  CHECK_THAT(refusal(with(R"("episodic": true, "bootstrap": [1])")),
             Contains("bootstrap: expected an array of field names"));
}

TEST_CASE("next_obs is the bootstrap field by default only when the table has one") {
  const auto with_next = parsed(
      with_field(R"({"name": "obs", "dtype": "int8"}, {"name": "next_obs", "dtype": "int8"})"));
  CHECK(with_next.episodes.bootstrap_fields == std::vector<std::string>{"next_obs"});
  CHECK(parsed(kMinimal).episodes.bootstrap_fields.empty());
}

TEST_CASE("a resolved description parses back to the same table") {
  for (std::string_view text : {kMinimal, kEpisodic}) {
    const TableConfig original = parsed(text);
    const json::object described = describe_table(original);
    auto again = parse_table_description(described, "described", 0);
    INFO((again ? std::string() : again.error().message));
    REQUIRE(again);
    CHECK(table_differences(original, *again).empty());
    CHECK(same_table_shape(original, *again));
    CHECK(again->seed == original.seed);
    CHECK(again->rate_limiter == original.rate_limiter);
    CHECK(again->schema == original.schema);
    CHECK(again->episodes == original.episodes);
    CHECK(again->sampler.priority_exponent == original.sampler.priority_exponent);
  }
}

TEST_CASE("a resolved description states every key, unbounded diffs as null") {
  const json::object described = describe_table(parsed(kMinimal));
  for (const char* key : {"name", "capacity", "fields", "sampler", "remover", "max_times_sampled",
                          "rate_limiter", "seed"}) {
    CAPTURE(key);
    CHECK(described.contains(key));
  }
  const auto& limiter = described.at("rate_limiter").as_object();
  CHECK(limiter.at("kind").as_string() == "custom");
  CHECK(limiter.at("min_diff").is_null());
  CHECK(limiter.at("max_diff").is_null());
  CHECK_FALSE(described.contains("episodic"));
  const json::object episodic = describe_table(parsed(kEpisodic));
  CHECK(episodic.at("episodic").as_bool());
  CHECK(episodic.at("max_compressed_bytes").is_number());
  CHECK(episodic.at("sampler").as_object().at("priority_exponent").as_double() == 0.8);
}

TEST_CASE("table_differences names each difference with the existing value first") {
  const TableConfig a = parsed(kMinimal);
  CHECK(table_differences(a, a).empty());
  TableConfig b = a;
  b.seed = a.seed + 1;
  CHECK(table_differences(a, b).empty());  // the seed is ignored
  b.capacity = 200;
  b.remover = SelectorKind::uniform;
  b.schema =
      Schema::create({Field{"obs", DType::float64, {4}}, Field{"act", DType::int64, {}}}).value();
  const auto differences = table_differences(a, b);
  REQUIRE(differences.size() == 5);
  CHECK(differences[0] == "capacity 100 vs 200");
  CHECK(differences[1] == "field 'obs' dtype float32 vs float64");
  CHECK(differences[2] == "field 'obs' shape [] vs [4]");
  CHECK(differences[3] == "field 'act' only in the request");
  CHECK(differences[4] == "remover fifo vs uniform");
  CHECK_FALSE(same_table_shape(a, b));
}

TEST_CASE("the priority exponent is compared only when both samplers are prioritized") {
  TableConfig a = parsed(kMinimal);
  TableConfig b = a;
  a.sampler.priority_exponent = 0.1;  // ignored for a uniform sampler
  CHECK(same_table_shape(a, b));
  a.sampler.kind = b.sampler.kind = SelectorKind::prioritized;
  const auto differences = table_differences(a, b);
  REQUIRE(differences.size() == 1);
  CHECK(differences[0] == "sampler priority_exponent 0.1 vs 0.6");
}

TEST_CASE("rate limiter differences print unbounded bounds and shortest numbers") {
  TableConfig a = parsed(kMinimal);
  TableConfig b = a;
  b.rate_limiter.max_diff = 2.5;
  b.rate_limiter.samples_per_insert = 0.1;
  const auto differences = table_differences(a, b);
  REQUIRE(differences.size() == 2);
  CHECK(differences[0] == "rate_limiter samples_per_insert 1 vs 0.1");
  CHECK(differences[1] == "rate_limiter max_diff unbounded vs 2.5");
}

TEST_CASE("fields in another order, and episode settings, count as differences") {
  TableConfig a =
      parsed(with_field(R"({"name": "x", "dtype": "int8"}, {"name": "y", "dtype": "int8"})"));
  TableConfig b =
      parsed(with_field(R"({"name": "y", "dtype": "int8"}, {"name": "x", "dtype": "int8"})"));
  CHECK(table_differences(a, b) == std::vector<std::string>{"fields in a different order"});
  TableConfig c = a;
  c.episodes.enabled = true;
  CHECK(table_differences(a, c) == std::vector<std::string>{"episodic false vs true"});
  TableConfig d = c;
  d.episodes.pad_history = false;
  CHECK(table_differences(c, d) == std::vector<std::string>{"reward or bootstrap fields differ"});
}
