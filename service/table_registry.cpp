#include "service/table_registry.h"

#include <spdlog/spdlog.h>
#include <chrono>

#include "service/waiting/background_release.h"

#include "core/table/episodic_table.h"

namespace replayd::service {

HostedTable::~HostedTable() {
  if (!table || table->allocated_bytes() < kReleasedInBackgroundBytes) return;
  std::shared_ptr<Table> doomed(std::move(table));
  // Reset inside the call: the release thread runs it without its queue's lock held. How
  // long it took is logged: freeing gigabytes is slow, and it is the server's own work.
  release_in_background([doomed]() mutable {
    const std::string name = doomed->name();
    const std::uint64_t bytes = doomed->allocated_bytes();
    const auto started = std::chrono::steady_clock::now();
    doomed.reset();
    spdlog::info(
        "table '{}': its {} MiB freed in {:.1f} ms (release thread)", name, bytes >> 20,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count());
  });
}

void table_changed(HostedTable& table) {
  table.sample_waiters.wake_front();
  table.insert_waiters.wake_front();
  if (table.tier) table.tier->poke(table);
}

std::shared_ptr<HostedTable> TableRegistry::find(std::string_view name) const {
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second;
}

std::shared_ptr<HostedTable> TableRegistry::add(std::unique_ptr<Table> table) {
  std::string name = table->name();
  auto hosted = std::make_shared<HostedTable>(std::move(table));
  tables_.emplace(std::move(name), hosted);
  return hosted;
}

bool TableRegistry::drop(std::string_view name) {
  auto it = tables_.find(name);
  if (it == tables_.end()) return false;
  it->second->dropped = true;
  it->second->insert_waiters.cancel_all(CancelReason::table_dropped);
  it->second->sample_waiters.cancel_all(CancelReason::table_dropped);
  tables_.erase(it);
  return true;
}

void TableRegistry::end_writer(std::uint64_t writer) {
  for (auto& [_, hosted] : tables_) {
    if (!hosted->table->episodic()) continue;
    if (hosted->table->episodic()->end_writer(writer) > 0) table_changed(*hosted);
  }
}

void TableRegistry::end_all_writers() {
  for (auto& [_, hosted] : tables_) {
    if (hosted->table->episodic()) hosted->table->episodic()->end_all_writers();
  }
}

void TableRegistry::cancel_all_waiters(CancelReason reason) {
  for (auto& [_, hosted] : tables_) {
    hosted->insert_waiters.cancel_all(reason);
    hosted->sample_waiters.cancel_all(reason);
  }
}

std::vector<std::shared_ptr<HostedTable>> TableRegistry::list() const {
  std::vector<std::shared_ptr<HostedTable>> result;
  result.reserve(tables_.size());
  for (const auto& [_, hosted] : tables_)
    result.push_back(hosted);
  return result;
}

}  // namespace replayd::service
