// The reply of a `sample` (docs/PROTOCOL.md): four per-draw columns (key, probability,
// weight, times_sampled) then the table's fields, the table state the draws saw in the
// metadata. Large fields are viewed in place: the Reply borrows table rows (see Reply).
// Threading: io_context thread only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/schema.h"
#include "core/table/table_config.h"
#include "service/protocol/reply.h"
#include "service/table_registry.h"

namespace replayd::service::commands {

// Bytes of the reply frame of a sample of n items from `table` (header and payload; the
// metadata's few hundred bytes are not counted). Used to refuse a sample whose reply would
// exceed max_frame_bytes before drawing.
std::uint64_t sample_reply_bytes(const Table& table, std::uint64_t n);
std::uint64_t sample_reply_bytes(const Schema& schema, std::uint64_t n);

// Checks that one item of the table `config` describes fits in a frame of `max_frame_bytes`:
// an insert of one item (header, the shortest metadata a client can send, the item's padded
// columns) and the reply to a sample of one item (header, its metadata at its longest, the
// per-draw and field columns). Otherwise the table could be created but never filled or
// never sampled: invalid_argument naming the item's size, the frame's and the limit,
// prefixed by `where` (e.g. "table 'replay'"). Cost: O(fields), two small JSON texts.
Status check_item_fits_frames(const TableConfig& config, std::uint64_t max_frame_bytes,
                              const std::string& where);

// The reply metadata's `,"state":{...}` member: the table (or window index) as the draws saw
// it, its size and mass; a client sampling several shards combines them with it.
std::string sampled_state(std::uint32_t size, const SamplingMass& mass);

}  // namespace replayd::service::commands

namespace replayd::service::commands {

// One column of a reply built by ColumnReply: leading dimensions (the reply's unless
// `leading` is set), then `shape`.
struct ReplyColumn {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;    // per row
  std::uint64_t item_bytes = 0;        // bytes per row
  std::vector<std::uint64_t> leading;  // empty: the reply's leading dimensions
  // Viewed: the reply borrows each row from table storage (rows(i) takes the pointers)
  // instead of holding a copy; such a Reply must be sent at once (see Reply).
  bool viewed = false;
};

// The four per-draw columns every sample reply begins with (key, probability, weight,
// times_sampled), with leading dimensions `leading` (empty: the reply's).
std::vector<ReplyColumn> draw_columns(const std::vector<std::uint64_t>& leading = {});
// The column of a table field, one value per row (viewed in place if `viewed`).
ReplyColumn field_column(const Field& field, bool viewed = false);

// A reply whose payload is columns laid out as in a sample reply (docs/PROTOCOL.md,
// "Columns"): each column's rows in C order, 8-byte aligned, padding zero-filled; the
// metadata lists name, dtype, shape ([leading dims] + shape) and offset of each column.
class ColumnReply {
 public:
  // Bytes of the frame (header and payload, not metadata) of these columns; UINT64_MAX when
  // it would overflow.
  static std::uint64_t frame_bytes(const std::vector<ReplyColumn>& columns,
                                   const std::vector<std::uint64_t>& leading);
  // Lays the columns out; the payload is allocated, padding zeroed, columns uninitialized.
  // `leading`: the leading dimensions of every column that states none; their product is
  // its rows.
  static Result<ColumnReply> create(std::vector<ReplyColumn> columns,
                                    std::vector<std::uint64_t> leading);
  // The same laid out in `target` (a region of a client's staging arena) instead of a
  // payload of its own: the columns are written there and the reply carries none (its frame
  // has no payload). No column may be viewed. invalid_argument naming both sizes when the
  // columns need more than target's bytes. Lifetime: the caller keeps target mapped until
  // the columns are written; the finished Reply does not refer to it.
  static Result<ColumnReply> create_in(std::vector<ReplyColumn> columns,
                                       std::vector<std::uint64_t> leading,
                                       std::span<std::byte> target);
  // Bytes of the payload (the columns laid out, padded), wherever it lies.
  std::uint64_t payload_bytes() const { return total_bytes_; }
  // Adds columns after the existing ones (whose contents are kept) and returns the index of
  // the first. Costs a copy of the existing columns. Not for a reply made by create_in.
  Result<std::size_t> extend(std::vector<ReplyColumn> columns);
  // Column i's bytes: its rows * item_bytes. Valid until finish() or extend().
  // Precondition: column i is not viewed.
  std::span<std::byte> column(std::size_t i);
  // The row pointers of the viewed column i, one per row, for the caller to set. Valid
  // until finish() or extend().
  std::span<const std::byte*> rows(std::size_t i) { return rows_[i]; }
  template <typename T>
  std::span<T> as(std::size_t i) {
    auto bytes = column(i);
    return {reinterpret_cast<T*>(bytes.data()), bytes.size() / sizeof(T)};
  }
  // Each column's byte offset in the payload, as the metadata lists it.
  const std::vector<std::uint64_t>& offsets() const { return offsets_; }
  // The reply: metadata {"n": leading[0], "columns": [...]<extra_meta>}, where extra_meta
  // is empty or starts with ','.
  Reply finish(std::uint64_t request_id, std::string_view extra_meta);
  // The reply with metadata `meta` made by the caller (listing the columns at offsets()).
  Reply finish_with_meta(std::uint64_t request_id, std::string meta);

 private:
  std::vector<ReplyColumn> columns_;
  std::vector<std::uint64_t> leading_;
  std::vector<std::uint64_t> offsets_;
  std::vector<std::uint64_t> bytes_;     // per column, without padding
  std::vector<std::uint64_t> owned_at_;  // per column not viewed: its offset in payload_
  std::uint64_t total_bytes_ = 0;        // of the payload on the wire
  std::vector<std::vector<const std::byte*>> rows_;  // per viewed column
  ByteBuffer payload_;                               // the columns not viewed, padded
  std::byte* external_ = nullptr;  // create_in: the columns lie here, not in payload_

  // Where the columns not viewed lie.
  std::byte* owned_base() { return external_ != nullptr ? external_ : payload_.data(); }
  // create's and create_in's layout; `target` empty: a payload of its own.
  static Result<ColumnReply> lay_out(std::vector<ReplyColumn> columns,
                                     std::vector<std::uint64_t> leading,
                                     std::span<std::byte> target, bool in_target);
};

// Which fields a sample of n items views in place (large items, up to a bound on the rows
// viewed per reply: each is one piece of the gathered write).
std::vector<bool> viewed_fields(const Schema& schema, std::uint64_t n);

// The reply to a plain sample of n items, and the buffers Table::sample draws into: the
// per-draw columns and the copied fields are the reply's own columns; large fields are
// viewed in the table (ReplyColumn::viewed). Ownership: the buffers view `reply`; moving a
// PlainSampleReply keeps them valid (the columns' storage does not move).
struct PlainSampleReply {
  ColumnReply reply;
  std::vector<std::span<std::byte>> columns;
  std::vector<std::span<const std::byte*>> rows;
  bool with_rows = true;       // false: keys only (the per-draw columns and slots, no field)
  bool with_versions = false;  // a last column, "version": each draw's policy version
  SampleBuffers buffers();
  // The version column (precondition: with_versions).
  std::span<std::uint64_t> versions();
  // The buffers of rows [begin, begin + count) only (one table's share of a mixed sample):
  // `columns` and `rows` hold the per-field spans the result views; they must outlive it.
  SampleBuffers buffers(std::uint64_t begin, std::uint64_t count,
                        std::vector<std::span<std::byte>>& columns,
                        std::vector<std::span<const std::byte*>>& rows);
  // Keys only, after the draws: the fifth column, each draw's slot (key & mask), which a
  // client indexes its mapping with; of rows [begin, begin + count) when given.
  void fill_slots(std::uint64_t slot_bits);
  void fill_slots(std::uint64_t slot_bits, std::uint64_t begin, std::uint64_t count);
};
// `with_rows` false: a keys-only sample (docs/SHM.md): the four per-draw columns, then
// "slot" (int64). `with_versions`: a last column, "version" (uint64, docs/VERSIONS.md).
// `view_large` false: every field copied (a table with a file tier, whose cold rows are read
// into the reply). `into` non-empty: the columns are laid out there (a region of the
// client's staging arena, "into" in docs/PROTOCOL.md), every field copied, and the reply's
// frame carries no payload; invalid_argument when they do not fit.
Result<PlainSampleReply> plain_sample_reply(const Schema& schema, std::uint64_t n,
                                            bool with_rows = true, bool with_versions = false,
                                            bool view_large = true, std::span<std::byte> into = {});

// Finishes the reply after the draws: its metadata (cached on the hosted table per n, as
// learners repeat one n), then `extra_meta` (empty or starting with ','), then the table's
// state as the draws saw it (`size`, `mass`).
Reply finish_plain_sample(HostedTable& hosted, PlainSampleReply& sample, std::uint64_t request_id,
                          std::uint32_t size, const SamplingMass& mass,
                          std::string_view extra_meta = {});

// The reply of a mixed sample (`sample_mixed`, docs/MIXED.md): the columns of `sample` as a
// plain sample of all its rows would list them (the tables share the schema of `first`, the
// batch's first table, which caches that list), then `parts_meta` (`,"parts":[...]`, each
// table's rows in request order) and the closing brace.
Reply finish_mixed_sample(HostedTable& first, PlainSampleReply& sample, std::uint64_t request_id,
                          std::string_view parts_meta);

}  // namespace replayd::service::commands
