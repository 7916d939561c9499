#include "service/table_description.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "core/storage/storage.h"
#include "service/protocol/json_reader.h"

namespace replayd::service {
namespace json = boost::json;
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Result<Field> parse_field(const json::value& value, const std::string& path) {
  REPLAYD_ASSIGN_OR_RETURN(JsonReader reader, JsonReader::of(value, path));
  Field field;
  REPLAYD_ASSIGN_OR_RETURN(field.name, reader.string("name"));
  REPLAYD_ASSIGN_OR_RETURN(std::string dtype, reader.string("dtype"));
  const auto parsed = parse_dtype(dtype);
  if (!parsed) {
    return reader.error("dtype", "unknown dtype '" + dtype +
                                     "': expected bool, int8..int64, uint8..uint64, float16, "
                                     "float32 or float64");
  }
  field.dtype = *parsed;
  if (const json::value* shape = reader.value("shape"); shape && !shape->is_null()) {
    if (!shape->is_array()) return reader.error("shape", "expected an array of dimensions");
    if (shape->get_array().size() > Schema::kMaxDims) {
      return reader.error("shape", "more than " + std::to_string(Schema::kMaxDims) + " dimensions");
    }
    for (const auto& dim : shape->get_array()) {
      const auto n = as_uint(dim);
      if (!n || *n == 0) return reader.error("shape", "dimensions must be integers >= 1");
      field.shape.push_back(*n);
    }
  }
  // Frame options (docs/PIXELS.md); Schema::create and the table's checks bound them.
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t stack, reader.uint_or("stack", 1));
  if (stack < 1 || stack > Schema::kMaxStack) {
    return reader.error("stack", "must be between 1 and " + std::to_string(Schema::kMaxStack));
  }
  field.stack = static_cast<std::uint32_t>(stack);
  REPLAYD_ASSIGN_OR_RETURN(field.next_of, reader.boolean_or("next_of", false));
  REPLAYD_ASSIGN_OR_RETURN(auto compression, reader.optional_string("compression"));
  if (compression && *compression == "zstd") {
    field.compression = Compression::zstd;
  } else if (compression && *compression != "none") {
    return reader.error(
        "compression", "unknown compression '" + *compression + "': expected \"zstd\" or \"none\"");
  }
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t level, reader.uint_or("compression_level", 3));
  if (level < 1 || level > 19) return reader.error("compression_level", "must be between 1 and 19");
  field.compression_level = static_cast<int>(level);
  REPLAYD_RETURN_IF_ERROR(reader.finish());
  return field;
}

Result<SelectorConfig> parse_sampler(const json::value& value, const std::string& path) {
  SelectorConfig config;
  if (value.is_string()) {
    auto parsed = parse_selector_kind(value.get_string());
    if (!parsed) return make_error(parsed.error().code, path + ": " + parsed.error().message);
    config.kind = *parsed;
    return config;
  }
  REPLAYD_ASSIGN_OR_RETURN(JsonReader reader, JsonReader::of(value, path));
  REPLAYD_ASSIGN_OR_RETURN(std::string kind, reader.string("kind"));
  auto parsed = parse_selector_kind(kind);
  if (!parsed) return reader.error("kind", parsed.error().message);
  config.kind = *parsed;
  if (config.kind == SelectorKind::prioritized) {
    REPLAYD_ASSIGN_OR_RETURN(config.priority_exponent,
                             reader.number_or("priority_exponent", config.priority_exponent));
    if (!std::isfinite(config.priority_exponent) || config.priority_exponent < 0) {
      return reader.error("priority_exponent", "must be finite and >= 0");
    }
  }
  REPLAYD_RETURN_IF_ERROR(reader.finish());
  return config;
}

Result<std::int64_t> min_size_of(JsonReader& reader, std::uint64_t fallback) {
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t k, reader.uint_or("min_size_to_sample", fallback));
  if (k < 1 || k > (std::uint64_t{1} << 40)) {
    return reader.error("min_size_to_sample", "must be between 1 and 2^40");
  }
  return static_cast<std::int64_t>(k);
}

Result<RateLimiterConfig> parse_rate_limiter(const json::value& value, const std::string& path) {
  REPLAYD_ASSIGN_OR_RETURN(JsonReader reader, JsonReader::of(value, path));
  REPLAYD_ASSIGN_OR_RETURN(std::string kind, reader.string("kind"));
  RateLimiterConfig config;
  if (kind == "min_size") {
    REPLAYD_ASSIGN_OR_RETURN(std::int64_t k, min_size_of(reader, 1));
    config = RateLimiterConfig::min_size(k);
  } else if (kind == "sample_to_insert_ratio") {
    REPLAYD_ASSIGN_OR_RETURN(double spi, reader.number("samples_per_insert"));
    REPLAYD_ASSIGN_OR_RETURN(std::int64_t k, min_size_of(reader, 1));
    REPLAYD_ASSIGN_OR_RETURN(double error_buffer, reader.number("error_buffer"));
    if (!std::isfinite(error_buffer) || error_buffer < 0) {
      return reader.error("error_buffer", "must be finite and >= 0");
    }
    config = RateLimiterConfig::sample_to_insert_ratio(spi, k, error_buffer);
  } else if (kind == "queue") {
    REPLAYD_ASSIGN_OR_RETURN(std::uint64_t size, reader.uint("size"));
    if (size < 1 || size > (std::uint64_t{1} << 40)) {
      return reader.error("size", "must be between 1 and 2^40");
    }
    config = RateLimiterConfig::queue(static_cast<std::int64_t>(size));
  } else if (kind == "custom") {
    REPLAYD_ASSIGN_OR_RETURN(config.samples_per_insert,
                             reader.number_or("samples_per_insert", 1.0));
    REPLAYD_ASSIGN_OR_RETURN(config.min_size_to_sample, min_size_of(reader, 1));
    REPLAYD_ASSIGN_OR_RETURN(config.min_diff, reader.number_or_null("min_diff", -kInf, -kInf));
    REPLAYD_ASSIGN_OR_RETURN(config.max_diff, reader.number_or_null("max_diff", kInf, kInf));
  } else {
    return reader.error("kind",
                        "unknown rate limiter '" + kind +
                            "': expected min_size, sample_to_insert_ratio, queue or custom");
  }
  REPLAYD_RETURN_IF_ERROR(reader.finish());
  return config;
}

json::value bound_to_json(double bound) {
  if (std::isinf(bound)) return nullptr;
  return bound;
}

// "versions": {"value": NAME, "drop_behind": k} (docs/VERSIONS.md).
Result<VersionsConfig> parse_versions_description(const json::value& value,
                                                  const std::string& path) {
  REPLAYD_ASSIGN_OR_RETURN(JsonReader reader, JsonReader::of(value, path));
  VersionsConfig versions;
  REPLAYD_ASSIGN_OR_RETURN(versions.value, reader.string("value"));
  if (!is_valid_value_name(versions.value)) {
    return reader.error("value", not_a_value_name());
  }
  REPLAYD_ASSIGN_OR_RETURN(versions.drop_behind, reader.optional_uint("drop_behind"));
  REPLAYD_RETURN_IF_ERROR(reader.finish());
  return versions;
}

}  // namespace

Result<TableConfig> parse_table_description(const json::value& value, const std::string& path,
                                            std::uint64_t default_seed) {
  REPLAYD_ASSIGN_OR_RETURN(JsonReader reader, JsonReader::of(value, path));
  TableConfig config;
  REPLAYD_ASSIGN_OR_RETURN(config.name, reader.string("name"));
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t capacity, reader.uint("capacity"));
  if (capacity < 1 || capacity > Storage::kMaxCapacity) {
    return reader.error("capacity",
                        "must be between 1 and " + std::to_string(Storage::kMaxCapacity));
  }
  config.capacity = static_cast<std::uint32_t>(capacity);

  const json::value* fields = reader.value("fields");
  if (!fields || !fields->is_array()) return reader.error("fields", "expected an array of fields");
  std::vector<Field> parsed_fields;
  for (std::size_t i = 0; i < fields->get_array().size(); ++i) {
    REPLAYD_ASSIGN_OR_RETURN(Field field,
                             parse_field(fields->get_array()[i],
                                         reader.path_of("fields") + "[" + std::to_string(i) + "]"));
    parsed_fields.push_back(std::move(field));
  }
  auto schema = Schema::create(std::move(parsed_fields));
  if (!schema) return reader.error("fields", schema.error().message);
  config.schema = std::move(schema).value();

  if (const json::value* sampler = reader.value("sampler"); sampler && !sampler->is_null()) {
    REPLAYD_ASSIGN_OR_RETURN(config.sampler, parse_sampler(*sampler, reader.path_of("sampler")));
  }
  REPLAYD_ASSIGN_OR_RETURN(auto remover, reader.optional_string("remover"));
  if (remover) {
    auto kind = parse_selector_kind(*remover);
    if (!kind) return reader.error("remover", kind.error().message);
    config.remover = *kind;
  }
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t max_times, reader.uint_or("max_times_sampled", 0));
  if (max_times > UINT32_MAX) return reader.error("max_times_sampled", "must be < 2^32");
  config.max_times_sampled = static_cast<std::uint32_t>(max_times);
  if (const json::value* limiter = reader.value("rate_limiter"); limiter && !limiter->is_null()) {
    REPLAYD_ASSIGN_OR_RETURN(config.rate_limiter,
                             parse_rate_limiter(*limiter, reader.path_of("rate_limiter")));
  }
  REPLAYD_ASSIGN_OR_RETURN(config.seed, reader.uint_or("seed", default_seed));
  REPLAYD_ASSIGN_OR_RETURN(config.episodes.enabled, reader.boolean_or("episodic", false));
  REPLAYD_ASSIGN_OR_RETURN(auto reward, reader.optional_string("reward"));
  if (reward) {
    if (!config.episodes.enabled) return reader.error("reward", "needs \"episodic\": true");
    config.episodes.reward_field = *reward;
  }
  // Without "bootstrap", next_obs is the bootstrap field if the table has one.
  if (config.schema.find("next_obs") < 0) config.episodes.bootstrap_fields.clear();
  if (const json::value* bootstrap = reader.value("bootstrap");
      bootstrap && !bootstrap->is_null()) {
    if (!config.episodes.enabled) return reader.error("bootstrap", "needs \"episodic\": true");
    if (!bootstrap->is_array())
      return reader.error("bootstrap", "expected an array of field names");
    config.episodes.bootstrap_fields.clear();
    for (const auto& name : bootstrap->get_array()) {
      if (!name.is_string()) return reader.error("bootstrap", "expected an array of field names");
      config.episodes.bootstrap_fields.emplace_back(name.get_string());
    }
  }
  REPLAYD_ASSIGN_OR_RETURN(config.episodes.pad_history, reader.boolean_or("pad_history", true));
  if (!config.episodes.pad_history && !config.episodes.enabled) {
    return reader.error("pad_history", "needs \"episodic\": true");
  }
  REPLAYD_ASSIGN_OR_RETURN(config.max_compressed_bytes, reader.uint_or("max_compressed_bytes", 0));
  if (const json::value* metadata = reader.value("metadata"); metadata && !metadata->is_null()) {
    config.metadata = json::serialize(*metadata);
    if (config.metadata.size() > kMaxTableMetadataBytes) {
      return reader.error("metadata", "is " + std::to_string(config.metadata.size()) +
                                          " bytes of JSON, at most " +
                                          std::to_string(kMaxTableMetadataBytes) +
                                          " are kept (keep large data in a table's fields)");
    }
  }
  if (const json::value* versions = reader.value("versions"); versions && !versions->is_null()) {
    REPLAYD_ASSIGN_OR_RETURN(config.versions,
                             parse_versions_description(*versions, path + ".versions"));
  }
  if (const json::value* tier = reader.value("file_tier"); tier && !tier->is_null()) {
    REPLAYD_ASSIGN_OR_RETURN(JsonReader tier_reader, JsonReader::of(*tier, path + ".file_tier"));
    REPLAYD_ASSIGN_OR_RETURN(config.file_tier.ram_bytes, tier_reader.uint("ram_bytes"));
    if (config.file_tier.ram_bytes == 0) {
      return tier_reader.error("ram_bytes",
                               "must be >= 1 (leave file_tier out to keep every "
                               "row in RAM)");
    }
    REPLAYD_RETURN_IF_ERROR(tier_reader.finish());
  }
  REPLAYD_RETURN_IF_ERROR(reader.finish());
  return config;
}

json::object describe_table(const TableConfig& config) {
  json::array fields;
  for (const auto& field : config.schema.fields()) {
    json::array shape;
    for (auto dim : field.shape)
      shape.push_back(dim);
    json::object described{
        {"name", field.name}, {"dtype", dtype_name(field.dtype)}, {"shape", std::move(shape)}};
    if (field.is_frame()) {
      described["stack"] = field.stack;
      described["next_of"] = field.next_of;
      described["compression"] = field.compression == Compression::zstd ? "zstd" : "none";
      described["compression_level"] = field.compression_level;
    }
    fields.push_back(std::move(described));
  }
  json::object sampler{{"kind", selector_kind_name(config.sampler.kind)}};
  if (config.sampler.kind == SelectorKind::prioritized) {
    sampler["priority_exponent"] = config.sampler.priority_exponent;
  }
  const auto& rl = config.rate_limiter;
  json::object description{
      {"name", config.name},
      {"capacity", config.capacity},
      {"fields", std::move(fields)},
      {"sampler", std::move(sampler)},
      {"remover", selector_kind_name(config.remover)},
      {"max_times_sampled", config.max_times_sampled},
      {"rate_limiter", json::object{{"kind", "custom"},
                                    {"samples_per_insert", rl.samples_per_insert},
                                    {"min_size_to_sample", rl.min_size_to_sample},
                                    {"min_diff", bound_to_json(rl.min_diff)},
                                    {"max_diff", bound_to_json(rl.max_diff)}}},
      {"seed", config.seed},
  };
  if (config.episodes.enabled) {
    description["episodic"] = true;
    description["reward"] = config.episodes.reward_field;
    json::array bootstrap;
    for (const auto& name : config.episodes.bootstrap_fields)
      bootstrap.emplace_back(name);
    description["bootstrap"] = std::move(bootstrap);
    description["pad_history"] = config.episodes.pad_history;
  }
  if (config.schema.has_compression()) {
    description["max_compressed_bytes"] = compressed_budget(config);
  }
  if (!config.metadata.empty()) description["metadata"] = json::parse(config.metadata);
  if (!config.versions.value.empty()) {
    json::object versions{{"value", config.versions.value}};
    if (config.versions.drop_behind) versions["drop_behind"] = *config.versions.drop_behind;
    description["versions"] = std::move(versions);
  }
  if (config.file_tier.enabled()) {
    description["file_tier"] = json::object{{"ram_bytes", config.file_tier.ram_bytes}};
  }
  return description;
}

namespace {

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The shortest text that reads back as `value`; "unbounded" for an infinite diff bound.
std::string number_text(double value) {
  if (std::isinf(value)) return "unbounded";
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return std::string(text, end);
}

template <typename T>
void compare(std::vector<std::string>& out, const std::string& what, const T& a, const T& b) {
  if (a != b) out.push_back(what + " " + a + " vs " + b);
}

void compare_fields(std::vector<std::string>& out, const Schema& a, const Schema& b) {
  for (const Field& field : a.fields()) {
    const int other = b.find(field.name);
    const std::string who = "field '" + field.name + "'";
    if (other < 0) {
      out.push_back(who + " only in the existing table");
      continue;
    }
    const Field& theirs = b.field(static_cast<std::size_t>(other));
    compare(out, who + " dtype", std::string(dtype_name(field.dtype)),
            std::string(dtype_name(theirs.dtype)));
    compare(out, who + " shape", shape_text(field.shape), shape_text(theirs.shape));
    if (field.stack != theirs.stack || field.next_of != theirs.next_of ||
        field.compression != theirs.compression ||
        field.compression_level != theirs.compression_level) {
      out.push_back(who + " frame options (stack, next_of, compression)");
    }
  }
  for (const Field& field : b.fields()) {
    if (a.find(field.name) < 0) out.push_back("field '" + field.name + "' only in the request");
  }
  if (out.empty() && a != b) out.push_back("fields in a different order");
}

}  // namespace

std::vector<std::string> table_differences(const TableConfig& a, const TableConfig& b) {
  std::vector<std::string> out;
  compare(out, "name", a.name, b.name);
  compare(out, "capacity", std::to_string(a.capacity), std::to_string(b.capacity));
  compare_fields(out, a.schema, b.schema);
  compare(out, "sampler", std::string(selector_kind_name(a.sampler.kind)),
          std::string(selector_kind_name(b.sampler.kind)));
  if (a.sampler.kind == SelectorKind::prioritized && b.sampler.kind == SelectorKind::prioritized) {
    compare(out, "sampler priority_exponent", number_text(a.sampler.priority_exponent),
            number_text(b.sampler.priority_exponent));
  }
  compare(out, "remover", std::string(selector_kind_name(a.remover)),
          std::string(selector_kind_name(b.remover)));
  compare(out, "max_times_sampled", std::to_string(a.max_times_sampled),
          std::to_string(b.max_times_sampled));
  const RateLimiterConfig& ra = a.rate_limiter;
  const RateLimiterConfig& rb = b.rate_limiter;
  compare(out, "rate_limiter samples_per_insert", number_text(ra.samples_per_insert),
          number_text(rb.samples_per_insert));
  compare(out, "rate_limiter min_size_to_sample", std::to_string(ra.min_size_to_sample),
          std::to_string(rb.min_size_to_sample));
  compare(out, "rate_limiter min_diff", number_text(ra.min_diff), number_text(rb.min_diff));
  compare(out, "rate_limiter max_diff", number_text(ra.max_diff), number_text(rb.max_diff));
  compare(out, "max_compressed_bytes", std::to_string(compressed_budget(a)),
          std::to_string(compressed_budget(b)));
  compare(out, "episodic", a.episodes.enabled ? "true" : "false",
          b.episodes.enabled ? "true" : "false");
  if (a.episodes.enabled && b.episodes.enabled && !(a.episodes == b.episodes)) {
    out.push_back("reward or bootstrap fields differ");
  }
  if (a.metadata != b.metadata) out.push_back("metadata differs");
  if (!(a.versions == b.versions)) out.push_back("versions (followed value or drop_behind) differ");
  if (!(a.file_tier == b.file_tier)) out.push_back("file_tier.ram_bytes differs");
  // A difference the texts above cannot show (e.g. two doubles printed alike) still counts.
  if (out.empty() && !(a.schema == b.schema && ra == rb)) out.push_back("the descriptions differ");
  return out;
}

Result<RateLimiterConfig> parse_rate_limiter_description(const json::value& value,
                                                         const std::string& path) {
  return parse_rate_limiter(value, path);
}

bool same_table_shape(const TableConfig& a, const TableConfig& b) {
  return table_differences(a, b).empty();
}

}  // namespace replayd::service
