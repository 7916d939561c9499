// ValueStore: the server's published values (docs/VALUES.md, docs/PROTOCOL.md "Published
// values"): named, versioned lists of arrays that a learner publishes in pieces and
// explorers fetch. A committed version is immutable and shared: the store holds the current
// one, and a fetch reply being written holds the version it carries (so publishing a new
// version never changes bytes on their way out). Uploads in progress belong to their
// connection and are dropped when it closes.
// Budgets (Limits: max_value_bytes, max_values_bytes, max_values,
// max_publishes_per_connection) are checked by begin() before anything is allocated; an
// upload's bytes count from begin() on.
// Threading: io_context thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "core/snapshot/value_snapshot.h"
#include "service/config.h"
#include "service/protocol/byte_buffer.h"
#include "service/protocol/unique_fd.h"
#include "service/shm/memfd.h"
#include "service/waiting/wait_queue.h"

namespace replayd::service {

struct ValueArray {
  std::string name;
  DType dtype = DType::uint8;
  std::vector<std::uint64_t> shape;
  std::uint64_t offset = 0;  // in the value's payload, a multiple of 8
  std::uint64_t bytes = 0;
};

// A value's payload: in a sealed memfd that same-host fetchers map (the server's shared
// memory, docs/SHM.md), or the parts as they arrived (no shared memory).
struct ValuePayload {
  std::vector<ByteBuffer> parts;  // in order; empty when in a memfd
  UniqueFd memfd;                 // the block, sealed against writes once committed
  shm::Mapping mapping;           // the server's mapping of it
  // The payload's bytes, in order (views valid while the payload lives).
  std::vector<std::span<const std::byte>> pieces() const;
};

// One committed version of a value. Immutable once committed.
struct ValueVersion {
  std::uint64_t version = 0;
  std::vector<ValueArray> arrays;
  std::uint64_t bytes = 0;  // the payload: the arrays laid out, padded to 8
  ValuePayload payload;
  std::string arrays_json;  // the "arrays" list of replies, made once
  std::chrono::steady_clock::time_point published_at;
};

// A name: its current version (none until the first commit) and the fetches waiting for a
// newer one. Lives as long as the store (held by shared_ptr so a waiting fetch keeps it).
struct PublishedValue {
  std::string name;
  std::shared_ptr<const ValueVersion> current;
  WaitQueue fetchers;  // woken (all) by each commit

  std::uint64_t version() const { return current ? current->version : 0; }
};

// What begin() accepted: the upload's id and layout.
struct UploadTicket {
  std::uint64_t id = 0;
  std::uint64_t bytes = 0;
  const std::vector<ValueArray>* arrays = nullptr;  // valid until the next call on the store
  // A staged upload's block (borrowed: the store owns it), for the reply to send a duplicate
  // of; -1 otherwise.
  int block_fd = -1;
};

class ValueStore {
 public:
  explicit ValueStore(const Limits& limits) : limits_(limits) {}

  // Values published from now on live in memfds that same-host fetchers map (the server's
  // shared memory is on). A memfd that cannot be made leaves that value in private memory
  // (fetched through the socket), logged.
  void use_shared_memory(bool on) { shared_memory_ = on; }

  // Starts a publish of `arrays` (name, dtype, shape; offsets are assigned here) as `name`,
  // at `version` (nullopt: current + 1; else it must exceed the current version), for
  // `connection`. invalid_argument for a bad name or version; resource_exhausted naming the
  // budget it would exceed. `staged` (a same-host publisher, docs/VALUES.md "Staged
  // publishes"): the block is made now and the publisher writes the value into it itself
  // (ticket.block_fd), sends no parts, and commits once it has unmapped it; a value of 0
  // bytes, or a server without shared memory, is not staged (block_fd -1).
  Result<UploadTicket> begin(std::uint64_t connection, const std::string& name,
                             std::optional<std::uint64_t> version, std::vector<ValueArray> arrays,
                             bool staged = false);
  // Appends `bytes` at `offset` (the bytes received so far) to the upload. Returns the bytes
  // received. not_found for an upload not of this connection; invalid_argument for a wrong
  // offset or bytes beyond the value.
  Result<std::uint64_t> add_part(std::uint64_t connection, std::uint64_t upload,
                                 std::uint64_t offset, ByteBuffer bytes);
  // Makes a complete upload the value's current version and wakes its fetchers. Returns the
  // value. A staged upload's block is sealed against every write first: invalid_argument
  // (the upload kept, to commit again) while the publisher still maps it writable.
  Result<const PublishedValue*> commit(std::uint64_t connection, std::uint64_t upload);
  // Drops the connection's uploads in progress (it closed).
  void end_connection(std::uint64_t connection);

  // The value of `name`, created empty (no version) for a fetch that waits for its first
  // publish; resource_exhausted beyond max_values names.
  Result<std::shared_ptr<PublishedValue>> entry(const std::string& name);
  // Every value, in name order.
  const std::map<std::string, std::shared_ptr<PublishedValue>, std::less<>>& values() const {
    return values_;
  }
  // Bytes of committed current versions and of uploads in progress.
  std::uint64_t held_bytes() const { return committed_bytes_ + upload_bytes_; }
  std::uint64_t upload_bytes() const { return upload_bytes_; }
  std::uint64_t publishes() const { return publishes_; }
  // The current versions, for a snapshot (docs/SNAPSHOT.md): views of the store's parts,
  // valid while the store is not changed (a forked snapshot writer's copy never is).
  std::vector<SnapshotValueOut> snapshot_values() const;
  // Restores a value read from a snapshot, at start (before anything is served). Refused
  // (resource_exhausted naming the budget) when the budgets of this server do not allow it.
  Status restore(SnapshotValueIn value);
  // Cancels every waiting fetch (server shutdown).
  void cancel_all(CancelReason reason);

 private:
  struct Upload {
    std::uint64_t connection = 0;
    std::string name;
    std::optional<std::uint64_t> version;
    std::vector<ValueArray> arrays;
    std::uint64_t bytes = 0;
    std::uint64_t received = 0;
    bool staged = false;  // the publisher writes the block (payload.memfd) itself
    ValuePayload payload;
  };
  Result<Upload*> upload_of(std::uint64_t connection, std::uint64_t upload);
  // The refusal of one more name than max_values.
  Error too_many_values(const std::string& name) const;

  const Limits& limits_;
  std::map<std::string, std::shared_ptr<PublishedValue>, std::less<>> values_;
  std::map<std::uint64_t, Upload> uploads_;
  std::uint64_t next_upload_ = 1;
  std::uint64_t committed_bytes_ = 0;
  std::uint64_t upload_bytes_ = 0;
  std::uint64_t publishes_ = 0;
  bool shared_memory_ = false;
};

// The "arrays" member of replies: [{"name","dtype","shape","offset"}, ...].
std::string value_arrays_json(const std::vector<ValueArray>& arrays);

}  // namespace replayd::service
