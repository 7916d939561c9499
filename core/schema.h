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

// How a field's values are stored and sent. zstd: each value is one zstd frame made by the
// writer (docs/PIXELS.md); the server keeps and sends those bytes as they came.
enum class Compression : std::uint8_t { none = 0, zstd = 1 };

struct Field {
  std::string name;
  DType dtype = DType::float32;
  std::vector<std::uint64_t> shape;  // per item; empty for a scalar
  // Frame options (episodic tables only; docs/PIXELS.md). stack: samples return the last
  // `stack` values of the episode, (stack, *shape). next_of: samples also return
  // next_<name>, the value of the following step. compression: see Compression;
  // compression_level: what writers pass to zstd (1..19), kept for them.
  std::uint32_t stack = 1;
  bool next_of = false;
  Compression compression = Compression::none;
  int compression_level = 3;

  // Elements per item (product of shape; 1 for a scalar).
  std::uint64_t elements() const;
  // Bytes per item: elements() * dtype_size(dtype).
  std::uint64_t item_bytes() const;
  // Whether samples send this field as frames (docs/PROTOCOL.md "Frame fields").
  bool is_frame() const { return stack > 1 || next_of || compression != Compression::none; }
  bool operator==(const Field& other) const = default;
};

class Schema {
 public:
  static constexpr std::size_t kMaxFields = 64;
  static constexpr std::size_t kMaxDims = 8;
  static constexpr std::size_t kMaxNameChars = 64;
  static constexpr std::uint32_t kMaxStack = 64;
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
  // Whether any field is a frame field / has next_of / is compressed; the largest stack.
  bool has_frames() const;
  bool has_next_of() const;
  bool has_compression() const;
  std::uint32_t max_stack() const;

  bool operator==(const Schema& other) const { return fields_ == other.fields_; }

 private:
  std::vector<Field> fields_;
  std::uint64_t item_bytes_ = 0;
};

}  // namespace replayd
