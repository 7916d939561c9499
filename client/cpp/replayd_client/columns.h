// InsertBatch: the columns of one insert, packed as docs/PROTOCOL.md lays them out (every
// field in the table's order, each padded to 8 bytes, optional float64 priorities last).
// It borrows the caller's arrays instead of copying them: the data must stay alive and
// unchanged until the insert call that sends it returns. Reusable: clear() keeps capacity,
// so a writer that refills one batch allocates nothing per request.
// Threading: not thread-safe; one batch belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replayd_client/dtype.h"
#include "replayd_client/wire/connection.h"

namespace replayd::client {

class InsertBatch {
 public:
  // A batch of `n` items (n >= 1).
  explicit InsertBatch(std::uint64_t n = 1);

  // Appends the next field's column: n items of `item_shape` ({} for a scalar), row-major,
  // `data` borrowed. Throws Error(invalid_argument) when data's size is not
  // n * prod(item_shape) * dtype_bytes(dtype), leaving the batch unchanged. O(rank).
  InsertBatch& add(std::string_view name, DType dtype, std::span<const std::uint64_t> item_shape,
                   std::span<const std::byte> data);
  InsertBatch& add(std::string_view name, DType dtype,
                   std::initializer_list<std::uint64_t> item_shape,
                   std::span<const std::byte> data) {
    return add(name, dtype, std::span<const std::uint64_t>(item_shape.begin(), item_shape.size()),
               data);
  }
  // Typed form: the dtype follows from T (dtype_of<T>).
  template <typename T>
  InsertBatch& add(std::string_view name, std::span<const T> values,
                   std::initializer_list<std::uint64_t> item_shape = {}) {
    return add(name, dtype_of<T>, item_shape, std::as_bytes(values));
  }
  template <typename T>
  InsertBatch& add(std::string_view name, const std::vector<T>& values,
                   std::initializer_list<std::uint64_t> item_shape = {}) {
    return add(name, std::span<const T>(values), item_shape);
  }

  // Appends the next field's column in its compressed wire form (docs/PROTOCOL.md, "Frame
  // fields"): `frame_sizes` (n uint32, one zstd frame per item) and the frames back to
  // back, both borrowed. Throws Error(invalid_argument) when there are not n sizes or
  // they do not add up to frames.size(), leaving the batch unchanged. O(n + rank).
  InsertBatch& add_compressed(std::string_view name, DType dtype,
                              std::span<const std::uint64_t> item_shape,
                              std::span<const std::uint32_t> frame_sizes,
                              std::span<const std::byte> frames);

  // Sets one priority per item (finite, >= 0; the server checks). Borrowed like the
  // columns. Throws Error(invalid_argument) when there are not n of them.
  InsertBatch& priorities(std::span<const double> values);

  // Forgets every column and the priorities and sets a new n; keeps allocated capacity.
  void clear(std::uint64_t n);

  std::uint64_t size() const { return n_; }
  std::size_t column_count() const { return used_columns_; }

  // Appends the request metadata of `op` ("insert", or "append_steps", whose metadata is
  // the same) for table `table` to `out`. O(columns).
  void append_meta(std::string& out, std::string_view table,
                   std::optional<std::uint64_t> timeout_ms, std::string_view op = "insert") const;
  // Appends the JSON array of the column descriptions alone (append_steps "final_columns",
  // end_episode "columns"). O(columns).
  void append_columns_json(std::string& out) const;
  // The payload as gather pieces (columns, padding, priorities); valid until the batch
  // changes.
  std::span<const PayloadPiece> payload() const { return pieces_; }
  // The same split where append_steps puts its episode-id column: the field columns, then
  // the priorities (empty without them).
  std::span<const PayloadPiece> field_payload() const {
    return std::span(pieces_).first(field_pieces());
  }
  std::span<const PayloadPiece> priority_payload() const {
    return std::span(pieces_).subspan(field_pieces());
  }

 private:
  struct Column {
    std::string name;
    DType dtype;
    std::vector<std::uint64_t> item_shape;
    std::optional<std::uint64_t> compressed_bytes;  // zstd frames of this many bytes
  };

  Column& next_column(std::string_view name, DType dtype,
                      std::span<const std::uint64_t> item_shape);
  void add_piece(std::span<const std::byte> data);

  std::uint64_t n_;
  std::vector<Column> columns_;
  std::size_t used_columns_ = 0;  // columns_[0, used_columns_) are live; the rest is capacity
  std::vector<PayloadPiece> pieces_;
  bool has_priorities_ = false;
  std::size_t priority_pieces_ = 0;  // pieces of the priorities (column and padding), last

  std::size_t field_pieces() const { return pieces_.size() - priority_pieces_; }
};

}  // namespace replayd::client
