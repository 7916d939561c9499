// Schema: the ordered, named fields every item of a table has. Each field is a dtype and a
// fixed shape (empty shape = scalar). Immutable once validated; safe to share read-only.
//
// Invariants of a validated schema: at least one field; names unique, 1..64 characters of
// [A-Za-z0-9_.-]; every dimension >= 1; at most kMaxDims dimensions; every item fits in
// kMaxItemBytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace replayd {

struct Field {
  std::string name;
  DType dtype = DType::float32;
  std::vector<std::uint64_t> shape;  // per item; empty for a scalar

  // Elements per item (product of shape; 1 for a scalar).
  std::uint64_t elements() const;
  // Bytes per item: elements() * dtype_size(dtype).
  std::uint64_t item_bytes() const;
  bool operator==(const Field& other) const = default;
};

class Schema {
 public:
  static constexpr std::size_t kMaxFields = 64;
  static constexpr std::size_t kMaxDims = 8;
  static constexpr std::size_t kMaxNameChars = 64;
  static constexpr std::uint64_t kMaxItemBytes = std::uint64_t{1}
                                                 << 30;  // 1 GiB per field per item

  // Validates and builds a schema. Errors name the offending field and the rule it breaks.
  static Result<Schema> create(std::vector<Field> fields);

  const std::vector<Field>& fields() const { return fields_; }
  std::size_t size() const { return fields_.size(); }
  const Field& field(std::size_t index) const { return fields_[index]; }
  // Index of the named field, or -1.
  int find(std::string_view name) const;
  // Sum of item_bytes() over all fields.
  std::uint64_t item_bytes() const { return item_bytes_; }

  bool operator==(const Schema& other) const { return fields_ == other.fields_; }

 private:
  std::vector<Field> fields_;
  std::uint64_t item_bytes_ = 0;
};

}  // namespace replayd
