// Columns of rows in a request payload (docs/PROTOCOL.md, "insert" and "Frame fields"):
// checking a request's column list against the table's fields, laying the payload out, and
// viewing each field's values in it. A field travels as its rows' values (rows x item
// bytes), or, compressed, as rows uint32 frame sizes followed by the zstd frames back to
// back (the column says "compression": "zstd" and "bytes": their total).
// Pure functions over a request; the spans view the caller's payload.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "core/table/table.h"
#include "service/protocol/batch_layout.h"

namespace replayd::service::commands {

// One listed field as it travels.
struct ColumnEncoding {
  std::size_t field = 0;  // index in the schema
  bool compressed = false;
  std::uint64_t frame_bytes = 0;  // compressed: the frames' total bytes
};

// Checks `list` against the schema fields `fields` (in that order) for `rows` rows:
// names, dtypes, shapes ([rows] + the field's shape) and the compression of each. Appends
// the byte size of each payload column the fields take (one, or two when compressed) to
// `column_bytes`. Errors: invalid_argument naming the column and what is wrong.
Result<std::vector<ColumnEncoding>> decode_columns(const boost::json::array& list,
                                                   std::span<const std::size_t> fields,
                                                   const Table& table, std::uint64_t rows,
                                                   std::vector<std::uint64_t>& column_bytes);

// Rows' values in a payload: per schema field, the bytes (empty when not listed) and, for a
// compressed field, the frame sizes.
struct ColumnViews {
  std::vector<std::span<const std::byte>> values;
  std::vector<std::span<const std::uint32_t>> frame_sizes;  // empty unless some are compressed
};

// Views the fields `encodings` describe in `payload`, whose columns start at
// layout.offsets[first]; returns the index of the next payload column.
std::size_t view_columns(std::span<const std::byte> payload, const ColumnLayout& layout,
                         std::size_t first, std::span<const ColumnEncoding> encodings,
                         const Schema& schema, std::uint64_t rows, ColumnViews& views);

// The value of row `row` of each listed field (one frame when compressed; the rows of a
// compressed field are found by summing sizes: O(rows)). Empty spans elsewhere.
std::vector<std::span<const std::byte>> row_values(const ColumnViews& views, const Schema& schema,
                                                   std::uint64_t row);

// Schema indexes of the next_of fields (the fields a final observation carries).
std::vector<std::size_t> next_of_fields(const Schema& schema);

}  // namespace replayd::service::commands
