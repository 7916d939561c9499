// Tests of service/table_registry.h: tables by name; dropping marks the table and cancels its
// waiters while a waiting request may still hold it.
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "core/table/table.h"
#include "service/table_registry.h"

using namespace replayd;
using namespace replayd::service;

namespace {

std::unique_ptr<Table> small_table(const std::string& name) {
  TableConfig config;
  config.name = std::string(name);
  config.schema = Schema::create({Field{"x", DType::int32, {}}}).value();
  config.capacity = 4;
  return Table::create(config).value();
}

}  // namespace

TEST_CASE("tables are found by name and listed in name order") {
  TableRegistry registry;
  registry.add(small_table("b"));
  registry.add(small_table("a"));
  CHECK(registry.size() == 2);
  CHECK(registry.find("a")->table->name() == "a");
  CHECK(registry.find("c") == nullptr);
  const auto list = registry.list();
  REQUIRE(list.size() == 2);
  CHECK(list[0]->table->name() == "a");
  CHECK(list[1]->table->name() == "b");
}

TEST_CASE("a dropped table is gone from the registry but alive for whoever holds it") {
  asio::io_context io;
  TableRegistry registry;
  auto held = registry.add(small_table("t"));
  WaitQueue::Waiter inserting(held->insert_waiters, io.get_executor());
  WaitQueue::Waiter sampling(held->sample_waiters, io.get_executor());
  CHECK(registry.drop("t"));
  CHECK_FALSE(registry.drop("t"));
  CHECK(registry.find("t") == nullptr);
  CHECK(held->dropped);
  CHECK(inserting.cancel_reason() == CancelReason::table_dropped);
  CHECK(sampling.cancel_reason() == CancelReason::table_dropped);
  CHECK(held->table->name() == "t");
}

TEST_CASE("stopping the server cancels every table's waiters") {
  asio::io_context io;
  TableRegistry registry;
  auto a = registry.add(small_table("a"));
  auto b = registry.add(small_table("b"));
  WaitQueue::Waiter first(a->sample_waiters, io.get_executor());
  WaitQueue::Waiter second(b->insert_waiters, io.get_executor());
  registry.cancel_all_waiters(CancelReason::shutting_down);
  CHECK(first.cancel_reason() == CancelReason::shutting_down);
  CHECK(second.cancel_reason() == CancelReason::shutting_down);
}
