#include "core/schema.h"

#include <algorithm>
#include <set>

namespace replayd {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-' || c == '/';
}

Status validate_field(const Field& field) {
  const std::string who = "field '" + field.name + "'";
  if (field.name.empty())
    return make_error(ErrorCode::invalid_argument, "a field has an empty name");
  if (field.name.size() > Schema::kMaxNameChars) {
    return make_error(
        ErrorCode::invalid_argument,
        who + ": name longer than " + std::to_string(Schema::kMaxNameChars) + " characters");
  }
  for (char c : field.name) {
    if (!is_name_char(c)) {
      return make_error(ErrorCode::invalid_argument,
                        who + ": name may contain only letters, digits, '_', '.', '-' and '/'");
    }
  }
  // '/' separates the path of a nested leaf ("obs/camera"): no empty path component.
  if (field.name.front() == '/' || field.name.back() == '/' ||
      field.name.find("//") != std::string::npos) {
    return make_error(ErrorCode::invalid_argument,
                      who +
                          ": '/' separates the parts of a nested field's path (obs/camera); "
                          "a name may not start or end with '/' nor hold '//'");
  }
  if (field.shape.size() > Schema::kMaxDims) {
    return make_error(ErrorCode::invalid_argument,
                      who + ": shape has " + std::to_string(field.shape.size()) +
                          " dimensions, at most " + std::to_string(Schema::kMaxDims) +
                          " are allowed");
  }
  std::uint64_t bytes = dtype_size(field.dtype);
  for (std::size_t i = 0; i < field.shape.size(); ++i) {
    const std::uint64_t dim = field.shape[i];
    if (dim == 0) {
      return make_error(ErrorCode::invalid_argument, who + ": dimension " + std::to_string(i) +
                                                         " is 0, dimensions must be >= 1");
    }
    if (dim > Schema::kMaxItemBytes || bytes * dim > Schema::kMaxItemBytes) {
      return make_error(
          ErrorCode::invalid_argument,
          who + ": one item would exceed " + std::to_string(Schema::kMaxItemBytes) + " bytes");
    }
    bytes *= dim;
  }
  if (field.stack < 1 || field.stack > Schema::kMaxStack) {
    return make_error(ErrorCode::invalid_argument, who + ": stack must be between 1 and " +
                                                       std::to_string(Schema::kMaxStack) +
                                                       ", got " + std::to_string(field.stack));
  }
  if (field.compression_level < 1 || field.compression_level > 19) {
    return make_error(ErrorCode::invalid_argument,
                      who + ": compression level must be between 1 and 19, got " +
                          std::to_string(field.compression_level));
  }
  return Ok{};
}

}  // namespace

std::uint64_t Field::elements() const {
  std::uint64_t n = 1;
  for (auto dim : shape)
    n *= dim;
  return n;
}

std::uint64_t Field::item_bytes() const {
  return elements() * dtype_size(dtype);
}

Result<Schema> Schema::create(std::vector<Field> fields) {
  if (fields.empty()) return make_error(ErrorCode::invalid_argument, "schema has no fields");
  if (fields.size() > kMaxFields) {
    return make_error(ErrorCode::invalid_argument, "schema has " + std::to_string(fields.size()) +
                                                       " fields, at most " +
                                                       std::to_string(kMaxFields) + " are allowed");
  }
  std::set<std::string> seen;
  Schema schema;
  for (const auto& field : fields) {
    if (auto status = validate_field(field); !status) return status.error();
    if (!seen.insert(field.name).second) {
      return make_error(ErrorCode::invalid_argument,
                        "field '" + field.name + "' appears more than once");
    }
    schema.item_bytes_ += field.item_bytes();
  }
  schema.fields_ = std::move(fields);
  return schema;
}

bool Schema::has_frames() const {
  return std::any_of(fields_.begin(), fields_.end(), [](const Field& f) { return f.is_frame(); });
}

bool Schema::has_next_of() const {
  return std::any_of(fields_.begin(), fields_.end(), [](const Field& f) { return f.next_of; });
}

bool Schema::has_compression() const {
  return std::any_of(fields_.begin(), fields_.end(),
                     [](const Field& f) { return f.compression != Compression::none; });
}

std::uint32_t Schema::max_stack() const {
  std::uint32_t most = 1;
  for (const auto& field : fields_)
    most = std::max(most, field.stack);
  return most;
}

int Schema::find(std::string_view name) const {
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (fields_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace replayd
