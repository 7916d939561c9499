// Table descriptions of Reverb's queue and stack tables (docs/CONFIG.md, "Selectors"), ready
// for Client::create_table. Pure functions; no connection involved.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstdint>
#include <string_view>

namespace replayd::client {

// A FIFO queue of at most `size` items (1 .. 2^31): sampler and remover "fifo",
// max_times_sampled 1, the "queue" rate limiter and capacity `size`. Every item is sampled
// exactly once, oldest first; an insert into a full queue waits for a sample and a sample
// from an empty queue waits for an insert. `fields` as in any description:
// [{"name": "obs", "dtype": "float32", "shape": [4]}, ...]. The server validates the result.
boost::json::object queue_table(std::string_view name, boost::json::array fields,
                                std::uint64_t size);

// The same with "lifo" sampler and remover: newest item first.
boost::json::object stack_table(std::string_view name, boost::json::array fields,
                                std::uint64_t size);

}  // namespace replayd::client
