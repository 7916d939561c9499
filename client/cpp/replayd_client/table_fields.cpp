#include "replayd_client/table_fields.h"

#include <boost/json/array.hpp>

#include "replayd_client/client.h"
#include "replayd_client/error.h"

namespace replayd::client {
namespace json = boost::json;
namespace {

[[noreturn]] void bad_description(std::string_view table, const std::string& why) {
  throw Error(ErrorCode::bad_reply, "table '" + std::string(table) + "': " + why);
}

std::uint64_t uint_or(const json::object& spec, std::string_view key, std::uint64_t fallback,
                      std::string_view table) {
  const json::value* value = spec.if_contains(key);
  if (!value || value->is_null()) return fallback;
  if (value->is_uint64()) return value->get_uint64();
  if (value->is_int64() && value->get_int64() >= 0) {
    return static_cast<std::uint64_t>(value->get_int64());
  }
  bad_description(table, "field option '" + std::string(key) + "' is not a count");
}

FieldDescription field_of(const json::value& value, std::string_view table) {
  const json::object* spec = value.if_object();
  if (!spec) bad_description(table, "a field description is not an object");
  FieldDescription field;
  const json::value* name = spec->if_contains("name");
  if (!name || !name->is_string()) bad_description(table, "a field without a name");
  field.name = std::string(name->get_string());
  const json::value* dtype_text = spec->if_contains("dtype");
  const auto dtype =
      dtype_text && dtype_text->is_string() ? parse_dtype(dtype_text->get_string()) : std::nullopt;
  if (!dtype) bad_description(table, "field '" + field.name + "' of unknown dtype");
  field.dtype = *dtype;
  const json::value* shape = spec->if_contains("shape");
  if (!shape || !shape->is_array())
    bad_description(table, "field '" + field.name + "' without shape");
  std::uint64_t values = 1;
  for (const auto& dim : shape->get_array()) {
    if (!dim.is_uint64() && !(dim.is_int64() && dim.get_int64() >= 0)) {
      bad_description(table, "field '" + field.name + "' has a bad dimension");
    }
    field.shape.push_back(dim.to_number<std::uint64_t>());
    values *= field.shape.back();
  }
  field.item_bytes = values * dtype_bytes(field.dtype);
  field.stack = uint_or(*spec, "stack", 1, table);
  if (const json::value* next_of = spec->if_contains("next_of"); next_of && next_of->is_bool()) {
    field.next_of = next_of->get_bool();
  }
  if (const json::value* compression = spec->if_contains("compression");
      compression && compression->is_string()) {
    if (compression->get_string() == "zstd") {
      field.compression = Compression::zstd;
    } else if (compression->get_string() != "none") {
      bad_description(table, "field '" + field.name + "' has an unknown compression");
    }
  }
  field.compression_level = static_cast<int>(uint_or(*spec, "compression_level", 3, table));
  return field;
}

}  // namespace

std::vector<FieldDescription> fields_of(const json::object& description, std::string_view table) {
  const json::value* fields = description.if_contains("fields");
  if (!fields || !fields->is_array()) bad_description(table, "a description without fields");
  std::vector<FieldDescription> out;
  out.reserve(fields->get_array().size());
  for (const auto& value : fields->get_array())
    out.push_back(field_of(value, table));
  return out;
}

json::object table_description(Client& client, std::string_view table) {
  const json::object info = client.info(table);
  const json::value* tables = info.if_contains("tables");
  if (!tables || !tables->is_array() || tables->get_array().empty() ||
      !tables->get_array().front().is_object()) {
    bad_description(table, "info without the table");
  }
  const json::value* description =
      tables->get_array().front().get_object().if_contains("description");
  if (!description || !description->is_object()) {
    bad_description(table, "info without its description");
  }
  return description->get_object();
}

}  // namespace replayd::client
