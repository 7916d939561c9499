#include "replayd_client/tables.h"

#include <utility>

namespace replayd::client {
namespace {

boost::json::object bounded_table(std::string_view name, boost::json::array fields,
                                  std::uint64_t size, std::string_view order) {
  return boost::json::object{
      {"name", name},
      {"capacity", size},
      {"fields", std::move(fields)},
      {"sampler", boost::json::object{{"kind", order}}},
      {"remover", order},
      {"max_times_sampled", 1},
      {"rate_limiter", boost::json::object{{"kind", "queue"}, {"size", size}}},
  };
}

}  // namespace

boost::json::object queue_table(std::string_view name, boost::json::array fields,
                                std::uint64_t size) {
  return bounded_table(name, std::move(fields), size, "fifo");
}

boost::json::object stack_table(std::string_view name, boost::json::array fields,
                                std::uint64_t size) {
  return bounded_table(name, std::move(fields), size, "lifo");
}

}  // namespace replayd::client
