// `read_steps` (docs/PROTOCOL.md): one page of what a table stores, in insertion order, after
// a cursor, so that nothing a server holds is write-only. An episodic table's page holds
// steps (key, episode, position, sequence, end, version, the fields; the cursor is the
// sequence); a plain table's holds items (key, priority, version, the fields; the cursor is
// the key). `version` is each row's policy version (docs/VERSIONS.md). A page holds
// at most n rows and never more than fits in max_frame_bytes; a client reads everything by
// passing the returned `next` until a page is empty. Not rate limited and never waits.
#include <algorithm>

#include "core/storage/copy_cell.h"
#include "service/commands/handlers.h"
#include "service/protocol/pixel_frame_columns.h"
#include "service/protocol/sample_reply.h"

namespace replayd::service::commands {
namespace {

// Room left for the metadata of a page when sizing it against max_frame_bytes.
constexpr std::uint64_t kPageMetaBytes = 64 * 1024;

// The columns before the fields: an episodic table's steps, or a plain table's items.
std::vector<ReplyColumn> leading_columns(bool episodic) {
  if (!episodic) {
    return {{"key", "uint64", {}, 8, {}},
            {"priority", "float64", {}, 8, {}},
            {"version", "uint64", {}, 8, {}}};
  }
  return {{"key", "uint64", {}, 8, {}},      {"episode", "uint64", {}, 8, {}},
          {"position", "uint32", {}, 4, {}}, {"sequence", "uint64", {}, 8, {}},
          {"end", "uint8", {}, 1, {}},       {"version", "uint64", {}, 8, {}}};
}

std::vector<ReplyColumn> page_columns(const Table& table) {
  std::vector<ReplyColumn> columns = leading_columns(table.episodic() != nullptr);
  for (const auto& field : table.schema().fields()) {
    if (field.compression != Compression::none) continue;  // frame columns (frame_columns.h)
    columns.push_back({field.name,
                       std::string(dtype_name(field.dtype)),
                       {field.shape.begin(), field.shape.end()},
                       field.item_bytes(),
                       {}});
  }
  return columns;
}

// The page's column of each field (empty for compressed fields, whose values follow as
// frame columns).
std::vector<std::span<std::byte>> step_field_columns(const Table& table, ColumnReply& page) {
  std::vector<std::span<std::byte>> columns;
  std::size_t next_column = 6;
  for (std::size_t f = 0; f < table.schema().size(); ++f) {
    if (table.schema().field(f).compression != Compression::none) {
      columns.emplace_back();
    } else {
      columns.push_back(page.column(next_column++));
    }
  }
  return columns;
}

// Reads up to `rows` steps after `after` into a reply of exactly that many rows; compressed
// fields' values follow as frame columns, and `frame_meta` receives their description. A
// table with a file tier lists the cold steps' rows in `cold` (emptied first), their
// written-out fields left for the caller to read.
Result<ColumnReply> read_step_page(const Table& table, std::uint64_t after, std::uint64_t rows,
                                   bool raw, std::uint64_t& got, std::string& frame_meta,
                                   std::vector<ColdDraw>& cold) {
  REPLAYD_ASSIGN_OR_RETURN(ColumnReply page, ColumnReply::create(page_columns(table), {rows}));
  got = 0;
  frame_meta.clear();
  cold.clear();
  if (rows == 0) {  // an empty page still describes the frame columns it has (none)
    if (!table.schema().has_compression()) return page;
    const std::vector<std::vector<std::uint32_t>> none(table.schema().size());
    REPLAYD_ASSIGN_OR_RETURN(frame_meta, add_frame_columns(page, table, none, raw, false));
    return page;
  }
  const Schema& schema = table.schema();
  const std::vector<std::span<std::byte>> columns = step_field_columns(table, page);
  std::vector<std::uint32_t> slots(schema.has_compression() ? rows : 0);
  StepBuffers buffers{page.as<std::uint64_t>(0),
                      page.as<std::uint64_t>(1),
                      page.as<std::uint32_t>(2),
                      page.as<std::uint64_t>(3),
                      columns,
                      slots,
                      page.as<std::uint8_t>(4),
                      page.as<std::uint64_t>(5)};
  if (table.tier() != nullptr) buffers.cold = &cold;
  REPLAYD_ASSIGN_OR_RETURN(got, table.episodic()->read_steps(after, buffers));
  if (slots.empty()) return page;
  std::vector<std::vector<std::uint32_t>> frames(schema.size());
  for (std::size_t f = 0; f < schema.size(); ++f) {
    if (schema.field(f).compression != Compression::none)
      frames[f].assign(slots.begin(), slots.begin() + static_cast<std::ptrdiff_t>(got));
  }
  REPLAYD_ASSIGN_OR_RETURN(frame_meta, add_frame_columns(page, table, frames, raw, false));
  return page;
}

// The slots of the at most `rows` stored items with the smallest keys above `after`, in key
// (insertion) order. O(capacity + rows log rows): one pass over the slots per page.
std::vector<std::uint32_t> item_slots_after(const Storage& storage, std::uint64_t after,
                                            std::uint64_t rows) {
  std::vector<std::uint32_t> slots;
  for (std::uint32_t slot = 0; slot < storage.capacity(); ++slot) {
    if (storage.occupied(slot) && storage.key(slot) > after) slots.push_back(slot);
  }
  const auto by_key = [&storage](std::uint32_t a, std::uint32_t b) {
    return storage.key(a) < storage.key(b);
  };
  if (slots.size() > rows) {
    std::nth_element(slots.begin(), slots.begin() + static_cast<std::ptrdiff_t>(rows), slots.end(),
                     by_key);
    slots.resize(rows);
  }
  std::sort(slots.begin(), slots.end(), by_key);
  return slots;
}

// A plain table's page: the items of `slots`, their keys, priorities and fields. The rows a
// file tier holds on disk are left out of the fields and listed in `cold`.
Result<ColumnReply> read_item_page(const Table& table, std::span<const std::uint32_t> slots,
                                   std::vector<ColdDraw>& cold) {
  REPLAYD_ASSIGN_OR_RETURN(ColumnReply page,
                           ColumnReply::create(page_columns(table), {slots.size()}));
  const Storage& storage = table.storage();
  const auto keys = page.as<std::uint64_t>(0);
  const auto priorities = page.as<double>(1);
  const auto versions = page.as<std::uint64_t>(2);
  for (std::size_t row = 0; row < slots.size(); ++row) {
    keys[row] = storage.key(slots[row]);
    priorities[row] = storage.priority(slots[row]);
    versions[row] = storage.version(slots[row]);
  }
  const TierIndex* tier = table.tier();
  const auto is_cold = [&](std::size_t row) { return tier != nullptr && tier->cold(slots[row]); };
  for (std::size_t row = 0; row < slots.size(); ++row)
    if (is_cold(row)) cold.push_back(ColdDraw{row, tier->location(slots[row])});
  for (std::size_t f = 0; f < table.schema().size(); ++f) {
    const std::uint64_t bytes = storage.item_bytes(f);
    std::byte* out = page.column(3 + f).data();
    for (std::size_t row = 0; row < slots.size(); ++row)
      if (!is_cold(row)) copy_cell(out + row * bytes, storage.cell(f, slots[row]), bytes);
  }
  return page;
}

}  // namespace

asio::awaitable<Result<Reply>> read_steps(Call& call) {
  const Table& table = *call.table->table;
  REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t after, call.args.uint_or("after", 0));
  REPLAYD_CO_ASSIGN_OR_RETURN(bool raw, call.args.boolean_or("raw", false));
  const auto columns = page_columns(table);
  std::uint64_t row_bytes = 0;
  for (const auto& column : columns)
    row_bytes += column.item_bytes;
  for (const auto& field : table.schema().fields()) {
    if (field.compression != Compression::none) row_bytes += frame_columns_bound(field, 1);
  }
  const std::uint64_t limit = call.service.limits.max_frame_bytes;
  const std::uint64_t overhead = kHeaderBytes + kPageMetaBytes + 8 * columns.size();
  const std::uint64_t fit = limit > overhead ? (limit - overhead) / row_bytes : 0;
  if (fit == 0) {
    co_return make_error(
        ErrorCode::resource_exhausted,
        "table '" + table.name() + "': one row is " + std::to_string(row_bytes) +
            " bytes; a page of rows does not fit in max_frame_bytes = " + std::to_string(limit));
  }
  const std::uint64_t rows = std::min({call.n, fit, std::uint64_t{table.size()}});
  if (table.episodic() == nullptr) {
    const auto slots = item_slots_after(table.storage(), after, rows);
    std::vector<ColdDraw> cold;
    REPLAYD_CO_ASSIGN_OR_RETURN(ColumnReply page, read_item_page(table, slots, cold));
    const std::uint64_t next = slots.empty() ? after : table.storage().key(slots.back());
    if (!cold.empty()) {  // read back from the file tier, suspended meanwhile
      std::shared_ptr<FileTier> tier = call.table->tier;
      std::vector<std::span<std::byte>> fields;
      for (std::size_t f = 0; f < table.schema().size(); ++f)
        fields.push_back(page.column(3 + f));
      const Status read = co_await tier->read_cold_into(table, cold, fields);
      REPLAYD_CO_RETURN_IF_ERROR(read);
    }
    co_return (page.finish(call.request_id, ",\"next\":" + std::to_string(next)));
  }
  std::uint64_t got = 0;
  std::string frame_meta;
  std::vector<ColdDraw> cold;
  REPLAYD_CO_ASSIGN_OR_RETURN(ColumnReply page,
                              read_step_page(table, after, rows, raw, got, frame_meta, cold));
  if (got < rows) {
    // The last page: read again into a reply of exactly the rows there are.
    const std::uint64_t last = got;
    REPLAYD_CO_ASSIGN_OR_RETURN(page,
                                read_step_page(table, after, last, raw, got, frame_meta, cold));
  }
  if (!cold.empty()) {  // read back from the file tier, suspended meanwhile
    std::shared_ptr<FileTier> tier = call.table->tier;
    const std::vector<std::span<std::byte>> fields = step_field_columns(table, page);
    const Status read = co_await tier->read_cold_into(table, cold, fields);
    REPLAYD_CO_RETURN_IF_ERROR(read);
  }
  std::uint64_t next = after;
  if (got > 0) next = page.as<std::uint64_t>(3)[got - 1];
  co_return (page.finish(call.request_id, ",\"next\":" + std::to_string(next) + frame_meta));
}

}  // namespace replayd::service::commands
