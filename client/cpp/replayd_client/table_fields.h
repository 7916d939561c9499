// The fields of a table as the server describes them (info's "description"), with the
// frame options of episodic tables (docs/PROTOCOL.md, "Frame fields"): stack, next_of and
// zstd compression. Pure functions plus one info round trip; no state.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "replayd_client/dtype.h"

namespace replayd::client {

class Client;

enum class Compression { none, zstd };

struct FieldDescription {
  std::string name;
  DType dtype = DType::float32;
  std::vector<std::uint64_t> shape;  // of one value; {} for a scalar
  std::size_t item_bytes = 0;        // prod(shape) * dtype_bytes(dtype)
  std::uint64_t stack = 1;           // samples return the last `stack` values (1..64)
  bool next_of = false;              // samples also return next_<name>
  Compression compression = Compression::none;
  int compression_level = 3;  // zstd level writers use (1..19)

  // Stacked, next_of or compressed: samples carry it as frames, not as a column.
  bool is_frame() const { return stack > 1 || next_of || compression != Compression::none; }
};

// The fields of a table description ({"fields": [...]} as info reports it), in table order.
// Throws Error(bad_reply) naming the table for a description that breaks the protocol.
std::vector<FieldDescription> fields_of(const boost::json::object& description,
                                        std::string_view table);

// The resolved description of `table` (one info round trip). Throws Error: not_found (no
// such table), bad_reply (an info reply without it), or whatever info throws.
boost::json::object table_description(Client& client, std::string_view table);

}  // namespace replayd::client
