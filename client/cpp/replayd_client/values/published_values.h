// Published values (docs/VALUES.md): named, versioned lists of arrays that a learner
// publishes and explorers fetch, e.g. a policy's weights. publish() sends the value in parts
// (publish_begin, publish_part..., publish_commit, all written before any reply is awaited),
// so the server serves other clients between them; fetch() waits on the server for a
// version newer than the caller's.
// Threading: as Client (the calls may come from several threads).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replayd_client/client.h"

namespace replayd::client {

// One array of a value to publish: its bytes (C order, dtype's size x the shape's product),
// borrowed until publish() returns.
struct ValueArrayIn {
  std::string name;
  DType dtype = DType::float32;
  std::vector<std::uint64_t> shape;
  std::span<const std::byte> bytes;
};

struct PublishOptions {
  // nullopt: the next version (current + 1); else a version above the current one.
  std::optional<std::uint64_t> version;
  // Bytes of each publish_part (a multiple of 8, within the server's max_frame_bytes).
  std::uint64_t part_bytes = std::uint64_t{4} << 20;
};

// Publishes `arrays` as `name`; returns the version committed. Throws Error with the
// server's code and message (resource_exhausted naming the budget, invalid_argument for a
// version not above the current one, ...), or Error(invalid_argument) before sending when
// an array's bytes do not match its dtype and shape.
std::uint64_t publish(Client& client, std::string_view name, std::span<const ValueArrayIn> arrays,
                      PublishOptions options = {});

// A fetched value: its version and arrays (views of the reply's payload, which it owns), or
// only the current version (nullopt when none was published) when nothing newer came.
class FetchedValue {
 public:
  struct Array {
    std::string name;
    DType dtype = DType::uint8;
    std::vector<std::uint64_t> shape;
    std::span<const std::byte> bytes;
  };
  FetchedValue() = default;
  FetchedValue(std::optional<std::uint64_t> version, bool changed, std::vector<Array> arrays,
               Buffer payload)
      : version_(version),
        changed_(changed),
        arrays_(std::move(arrays)),
        payload_(std::move(payload)) {}

  std::optional<std::uint64_t> version() const { return version_; }
  // Whether this reply carries a newer version (false: the wait ended without one).
  bool changed() const { return changed_; }
  const std::vector<Array>& arrays() const { return arrays_; }
  // The array of that name; throws Error(invalid_argument) when there is none.
  const Array& array(std::string_view name) const;

 private:
  std::optional<std::uint64_t> version_;
  bool changed_ = false;
  std::vector<Array> arrays_;
  Buffer payload_;
};

// The value `name` when the server holds a version above `newer_than` (nullopt: any);
// otherwise waits on the server until one is published or `timeout_ms` passes (nullopt: no
// limit; 0: no wait), then returns an unchanged FetchedValue (no value bytes moved).
FetchedValue fetch(Client& client, std::string_view name,
                   std::optional<std::uint64_t> newer_than = std::nullopt,
                   std::optional<std::uint64_t> timeout_ms = std::nullopt);

}  // namespace replayd::client
