// `insert` (docs/PROTOCOL.md): n items as columns in the payload, checked against the table's
// schema before anything is stored; runs once the rate limiter admits it.
#include <algorithm>
#include <boost/json.hpp>

#include "core/batch_layout.h"
#include "service/admission.h"
#include "service/commands/handlers.h"

namespace replayd::service::commands {
namespace json = boost::json;
namespace {

Error invalid(const std::string& message) {
  return make_error(ErrorCode::invalid_argument, message);
}

// Checks one entry of "columns" against field `index` of the schema.
Status check_column(const json::value& column, std::size_t index, const Field& field,
                    std::uint64_t n, const std::string& table) {
  const std::string where = "table '" + table + "': columns[" + std::to_string(index) + "]";
  if (!column.is_object()) return invalid(where + ": expected an object");
  JsonReader reader(column.get_object(), "columns[" + std::to_string(index) + "]");
  REPLAYD_ASSIGN_OR_RETURN(std::string name, reader.string("name"));
  if (name != field.name) {
    return invalid(where + ": column '" + name + "' where the table's field " +
                   std::to_string(index) + " is '" + field.name +
                   "' (send every field, in the table's order)");
  }
  const std::string who = "table '" + table + "': field '" + field.name + "'";
  REPLAYD_ASSIGN_OR_RETURN(std::string dtype, reader.string("dtype"));
  if (dtype != dtype_name(field.dtype)) {
    return invalid(who + ": dtype " + dtype + " does not match the table's " +
                   std::string(dtype_name(field.dtype)));
  }
  const json::value* shape = reader.value("shape");
  json::array expected{n};
  for (auto dim : field.shape)
    expected.push_back(dim);
  const std::string expected_text = json::serialize(expected);
  if (!shape || !shape->is_array() || shape->get_array().size() != expected.size()) {
    return invalid(who + ": shape must be " + expected_text + " ([n] + the field's shape)");
  }
  for (std::size_t d = 0; d < expected.size(); ++d) {
    const auto dim = as_uint(shape->get_array()[d]);
    if (!dim || *dim != expected[d].as_uint64()) {
      return invalid(who + ": shape " + json::serialize(*shape) + " does not match " +
                     expected_text + " ([n] + the field's shape)");
    }
  }
  return reader.finish();
}

// Names the fields that are missing from, or unknown to, a column list of the wrong length.
Error column_count_error(const json::array& list, const Table& table) {
  std::vector<std::string_view> listed;
  for (const auto& column : list) {
    const auto* object = column.if_object();
    const auto* name = object ? object->if_contains("name") : nullptr;
    if (name && name->is_string()) listed.push_back(name->get_string());
  }
  std::string missing, unknown;
  for (const auto& field : table.schema().fields()) {
    if (std::find(listed.begin(), listed.end(), field.name) == listed.end()) {
      missing += (missing.empty() ? "'" : ", '") + field.name + "'";
    }
  }
  for (auto name : listed) {
    if (table.schema().find(name) < 0)
      unknown += (unknown.empty() ? "'" : ", '") + std::string(name) + "'";
  }
  std::string message = "table '" + table.name() + "': columns lists " +
                        std::to_string(list.size()) + " fields, the table has " +
                        std::to_string(table.schema().fields().size());
  if (!missing.empty()) message += "; missing field " + missing;
  if (!unknown.empty()) message += "; unknown field " + unknown;
  return invalid(message);
}

// A validated insert. Owns the request's payload, which its column spans view.
class InsertWork final : public Deferred {
 public:
  InsertWork(std::shared_ptr<HostedTable> table, std::uint64_t request_id, std::uint64_t n,
             ByteBuffer payload)
      : table_(std::move(table)), request_id_(request_id), n_(n), payload_(std::move(payload)) {}

  void view_column(std::uint64_t offset, std::uint64_t bytes) {
    columns_.emplace_back(payload_.data() + offset, bytes);
  }
  void view_priorities(std::uint64_t offset) { priorities_ = {payload_.as<double>(offset), n_}; }

  WaitQueue& queue() override { return table_->insert_waiters; }
  bool ready() const override { return table_->table->may_insert(n_); }
  const HostedTable* table() const override { return table_.get(); }
  std::size_t held_bytes() const override { return payload_.size(); }
  std::string why_not_ready() const override {
    return "the rate limiter does not admit this insert now";
  }

  Reply run() override {
    ByteBuffer keys(n_ * sizeof(std::uint64_t));
    auto status = table_->table->insert(columns_, n_, priorities_, {keys.as<std::uint64_t>(0), n_});
    if (!status) return make_error_reply(request_id_, status.error());
    table_changed(*table_);
    return make_reply(request_id_, "{\"n\":" + std::to_string(n_) + "}", std::move(keys));
  }

 private:
  std::shared_ptr<HostedTable> table_;
  std::uint64_t request_id_;
  std::uint64_t n_;
  ByteBuffer payload_;
  std::vector<std::span<const std::byte>> columns_;
  std::span<const double> priorities_;
};

}  // namespace

Result<Outcome> insert(Call& call) {
  REPLAYD_ASSIGN_OR_RETURN(bool with_priorities, call.args.boolean_or("priorities", false));
  const json::value* columns = call.args.value("columns");
  const Table& table = *call.table->table;
  const auto& fields = table.schema().fields();
  if (!columns || !columns->is_array()) {
    return invalid("table '" + table.name() +
                   "': columns: expected an array describing every field");
  }
  const auto& list = columns->get_array();
  if (list.size() != fields.size()) return column_count_error(list, table);
  std::vector<std::uint64_t> bytes_per_item;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    REPLAYD_RETURN_IF_ERROR(check_column(list[i], i, fields[i], call.n, table.name()));
    bytes_per_item.push_back(fields[i].item_bytes());
  }
  if (with_priorities) bytes_per_item.push_back(sizeof(double));
  REPLAYD_ASSIGN_OR_RETURN(ColumnLayout layout, layout_columns(bytes_per_item, call.n));
  if (layout.total_bytes != call.frame.payload.size()) {
    return invalid("table '" + table.name() + "': payload holds " +
                   std::to_string(call.frame.payload.size()) + " bytes, the columns need " +
                   std::to_string(layout.total_bytes));
  }

  auto work = std::make_unique<InsertWork>(call.table, call.request_id, call.n,
                                           std::move(call.frame.payload));
  for (std::size_t i = 0; i < fields.size(); ++i)
    work->view_column(layout.offsets[i], call.n * bytes_per_item[i]);
  if (with_priorities) work->view_priorities(layout.offsets.back());
  return Outcome(std::move(work));
}

}  // namespace replayd::service::commands
