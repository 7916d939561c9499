#include "service/values/value_store.h"

#include "service/waiting/background_release.h"

#include "core/table/table_config.h"

#include <spdlog/spdlog.h>

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <set>

namespace replayd::service {
namespace {

constexpr std::size_t kMaxArrays = 4096;
constexpr std::size_t kMaxArrayNameChars = 256;
constexpr std::size_t kMaxDims = 8;

std::uint64_t padded(std::uint64_t bytes) {
  return (bytes + 7) / 8 * 8;
}

std::string gib_text(std::uint64_t bytes) {
  return std::to_string(bytes) + " bytes";
}

// Payloads from this size on are given back to the kernel off the io_context thread
// (service/waiting/background_release.h).
constexpr std::uint64_t kReleasedInBackgroundBytes = std::uint64_t{8} << 20;

// A new version whose last owner (the store, or the last fetch reply that carries it) may
// let go of it on the io_context thread: a large one is then freed on the release thread.
std::shared_ptr<ValueVersion> new_version() {
  return std::shared_ptr<ValueVersion>(new ValueVersion(), [](ValueVersion* version) {
    if (version->bytes < kReleasedInBackgroundBytes) {
      delete version;
      return;
    }
    release_in_background([version] { delete version; });
  });
}

// An upload's payload let go of (its publish failed or its connection closed).
void release_payload(ValuePayload payload, std::uint64_t bytes) {
  if (bytes < kReleasedInBackgroundBytes) return;  // freed here, at once
  auto held = std::make_shared<ValuePayload>(std::move(payload));
  release_in_background([held]() mutable { held.reset(); });
}

}  // namespace

std::string value_arrays_json(const std::vector<ValueArray>& arrays) {
  std::string out = "[";
  for (const ValueArray& array : arrays) {
    if (out.size() > 1) out += ',';
    out += "{\"name\":" + boost::json::serialize(boost::json::string(array.name));
    out += ",\"dtype\":\"" + std::string(dtype_name(array.dtype)) + "\",\"shape\":[";
    for (std::size_t d = 0; d < array.shape.size(); ++d) {
      if (d) out += ',';
      out += std::to_string(array.shape[d]);
    }
    out += "],\"offset\":" + std::to_string(array.offset) + "}";
  }
  return out + "]";
}

namespace {

// Lays the arrays out (offsets, bytes) and checks them; the payload's bytes, or an error.
Result<std::uint64_t> lay_out(std::vector<ValueArray>& arrays, std::uint64_t max_bytes) {
  if (arrays.empty() || arrays.size() > kMaxArrays) {
    return make_error(ErrorCode::invalid_argument,
                      "arrays: a value holds 1 to " + std::to_string(kMaxArrays) + " arrays, got " +
                          std::to_string(arrays.size()));
  }
  std::set<std::string_view> names;
  std::uint64_t offset = 0;
  for (ValueArray& array : arrays) {
    if (array.name.empty() || array.name.size() > kMaxArrayNameChars)
      return make_error(ErrorCode::invalid_argument, "arrays: a name has 1 to 256 characters");
    if (!names.insert(array.name).second) {
      return make_error(ErrorCode::invalid_argument,
                        "arrays: '" + array.name + "' is named twice; names are distinct");
    }
    if (array.shape.size() > kMaxDims) {
      return make_error(ErrorCode::invalid_argument, "arrays: '" + array.name + "' has " +
                                                         std::to_string(array.shape.size()) +
                                                         " dimensions, at most 8");
    }
    // Overflow-safe: stop as soon as the product passes the largest value allowed.
    std::uint64_t bytes = dtype_size(array.dtype);
    for (std::uint64_t dim : array.shape) {
      if (dim != 0 && bytes > max_bytes / dim) {
        return make_error(ErrorCode::resource_exhausted,
                          "array '" + array.name +
                              "' alone is more than max_value_bytes = " + gib_text(max_bytes));
      }
      bytes *= dim;
    }
    array.offset = offset;
    array.bytes = bytes;
    offset += padded(bytes);
    if (offset > max_bytes) {
      return make_error(ErrorCode::resource_exhausted,
                        "the value is more than max_value_bytes = " + gib_text(max_bytes) +
                            "; publish a smaller value or raise limits.max_value_bytes");
    }
  }
  return offset;
}

}  // namespace

std::vector<std::span<const std::byte>> ValuePayload::pieces() const {
  std::vector<std::span<const std::byte>> out;
  if (memfd.valid()) {
    if (!mapping.bytes().empty()) out.push_back(mapping.bytes());
    return out;
  }
  for (const ByteBuffer& part : parts)
    out.push_back(part.span());
  return out;
}

Error ValueStore::too_many_values(const std::string& name) const {
  return make_error(ErrorCode::resource_exhausted,
                    "the server holds max_values = " + std::to_string(limits_.max_values) +
                        " value names; '" + name + "' would be one more");
}

Result<std::shared_ptr<PublishedValue>> ValueStore::entry(const std::string& name) {
  if (auto found = values_.find(name); found != values_.end()) return found->second;
  if (!is_valid_value_name(name)) {
    return make_error(ErrorCode::invalid_argument, "name: '" + name + "' " + not_a_value_name());
  }
  if (values_.size() >= limits_.max_values) {
    return too_many_values(name);
  }
  auto value = std::make_shared<PublishedValue>();
  value->name = name;
  values_.emplace(name, value);
  return value;
}

Result<UploadTicket> ValueStore::begin(std::uint64_t connection, const std::string& name,
                                       std::optional<std::uint64_t> version,
                                       std::vector<ValueArray> arrays, bool staged) {
  if (!is_valid_value_name(name)) {
    return make_error(ErrorCode::invalid_argument, "name: '" + name + "' " + not_a_value_name());
  }
  const auto existing = values_.find(name);
  const std::uint64_t current = existing == values_.end() ? 0 : existing->second->version();
  if (version && *version <= current) {
    return make_error(ErrorCode::invalid_argument, "version: " + std::to_string(*version) +
                                                       " is not above the current version " +
                                                       std::to_string(current) + " of '" + name +
                                                       "' (leave it out to publish version " +
                                                       std::to_string(current + 1) + ")");
  }
  std::size_t mine = 0;
  for (const auto& [id, upload] : uploads_)
    mine += upload.connection == connection;
  if (mine >= limits_.max_publishes_per_connection) {
    return make_error(ErrorCode::resource_exhausted,
                      "this connection has " + std::to_string(mine) +
                          " publishes in progress, max_publishes_per_connection = " +
                          std::to_string(limits_.max_publishes_per_connection) +
                          "; commit them before beginning another");
  }
  if (existing == values_.end() && values_.size() >= limits_.max_values) {
    return too_many_values(name);
  }
  REPLAYD_ASSIGN_OR_RETURN(const std::uint64_t bytes, lay_out(arrays, limits_.max_value_bytes));
  if (held_bytes() + bytes > limits_.max_values_bytes) {
    return make_error(ErrorCode::resource_exhausted,
                      "publishing " + gib_text(bytes) + " beside the " + gib_text(held_bytes()) +
                          " of values held and publishes in progress would exceed "
                          "max_values_bytes = " +
                          gib_text(limits_.max_values_bytes));
  }
  ValuePayload payload;
  staged = staged && shared_memory_ && bytes > 0;
  if (staged) {
    // The publisher maps and fills it; the server maps it only once it is sealed (commit).
    REPLAYD_ASSIGN_OR_RETURN(payload.memfd, shm::create_memfd("replayd value " + name, bytes));
  } else if (shared_memory_ && bytes > 0) {
    // The block is made now and filled part by part: no copy of the whole value in one turn.
    auto memfd = shm::create_memfd("replayd value " + name, bytes);
    auto mapping =
        memfd ? shm::Mapping::map(memfd->get(), bytes) : Result<shm::Mapping>(memfd.error());
    if (mapping) {
      payload.memfd = std::move(memfd).value();
      payload.mapping = std::move(mapping).value();
    } else {
      spdlog::warn(
          "published value '{}': not in shared memory ({}); it is fetched through the socket", name,
          mapping.error().message);
    }
  }
  const std::uint64_t id = next_upload_++;
  Upload& upload = uploads_[id];
  upload.payload = std::move(payload);
  upload.connection = connection;
  upload.name = name;
  upload.version = version;
  upload.arrays = std::move(arrays);
  upload.bytes = bytes;
  upload.staged = staged;
  if (staged) upload.received = bytes;  // written by the publisher, not sent in parts
  upload_bytes_ += bytes;
  return UploadTicket{id, bytes, &upload.arrays, staged ? upload.payload.memfd.get() : -1};
}

Result<ValueStore::Upload*> ValueStore::upload_of(std::uint64_t connection, std::uint64_t upload) {
  auto found = uploads_.find(upload);
  if (found == uploads_.end() || found->second.connection != connection) {
    return make_error(ErrorCode::not_found,
                      "upload " + std::to_string(upload) +
                          " is not a publish in progress of this connection (uploads end with "
                          "their commit or their connection)");
  }
  return &found->second;
}

Result<std::uint64_t> ValueStore::add_part(std::uint64_t connection, std::uint64_t id,
                                           std::uint64_t offset, ByteBuffer bytes) {
  REPLAYD_ASSIGN_OR_RETURN(Upload * upload, upload_of(connection, id));
  if (upload->staged) {
    return make_error(ErrorCode::invalid_argument,
                      "upload " + std::to_string(id) +
                          " is staged: its publisher writes the value into the block it was "
                          "sent, then commits; it takes no parts");
  }
  if (offset != upload->received) {
    return make_error(ErrorCode::invalid_argument,
                      "offset: " + std::to_string(offset) + ", but " +
                          std::to_string(upload->received) +
                          " bytes were received so far: send the parts in order");
  }
  if (bytes.size() > upload->bytes - upload->received) {
    return make_error(ErrorCode::invalid_argument,
                      "a part of " + std::to_string(bytes.size()) + " bytes at offset " +
                          std::to_string(offset) + " goes beyond the value's " +
                          std::to_string(upload->bytes) + " bytes");
  }
  if (upload->payload.memfd.valid()) {
    if (!bytes.empty()) {
      std::memcpy(upload->payload.mapping.bytes().data() + offset, bytes.data(), bytes.size());
    }
  } else if (!bytes.empty()) {
    upload->payload.parts.push_back(std::move(bytes));
  }
  upload->received += bytes.size();
  return upload->received;
}

// A staged block becomes immutable before it is committed: F_SEAL_WRITE, which the kernel
// refuses (EBUSY) while any writable shared mapping of it exists, so no byte can change
// after the commit, through any mapping or descriptor; then the server's read-only mapping
// (socket fetches copy from it) and F_SEAL_SEAL.
Status seal_staged_block(const std::string& name, ValuePayload& payload, std::uint64_t bytes) {
  if (::fcntl(payload.memfd.get(), F_ADD_SEALS, F_SEAL_WRITE) != 0) {
    if (errno == EBUSY) {
      return make_error(ErrorCode::invalid_argument,
                        "value '" + name +
                            "': its staged block is still mapped writable: unmap it before "
                            "publish_commit");
    }
    return make_error(
        ErrorCode::resource_exhausted,
        "value '" + name + "': sealing its staged block failed: " + std::strerror(errno));
  }
  REPLAYD_ASSIGN_OR_RETURN(payload.mapping,
                           shm::Mapping::map_read_only(payload.memfd.get(), bytes));
  return shm::seal_memfd(payload.memfd.get(), shm::Writers::anyone);
}

Result<const PublishedValue*> ValueStore::commit(std::uint64_t connection, std::uint64_t id) {
  REPLAYD_ASSIGN_OR_RETURN(Upload * upload, upload_of(connection, id));
  if (upload->received != upload->bytes) {
    return make_error(ErrorCode::invalid_argument,
                      "the value is " + std::to_string(upload->bytes) + " bytes and " +
                          std::to_string(upload->received) +
                          " were received: send every part before the commit");
  }
  // begin() counted a new name against max_values already; a fetch may have made it since.
  std::shared_ptr<PublishedValue>& slot = values_[upload->name];
  if (!slot) {
    slot = std::make_shared<PublishedValue>();
    slot->name = upload->name;
  }
  const std::shared_ptr<PublishedValue> value = slot;
  const std::uint64_t current = value->version();
  if (upload->version && *upload->version <= current) {
    // Another publish of a higher version committed since begin().
    const std::string message = "version: " + std::to_string(*upload->version) +
                                " is no longer above the current version " +
                                std::to_string(current) + " of '" + upload->name + "'";
    upload_bytes_ -= upload->bytes;
    release_payload(std::move(upload->payload), upload->bytes);
    uploads_.erase(id);
    return make_error(ErrorCode::invalid_argument, message);
  }
  if (upload->staged) {
    REPLAYD_RETURN_IF_ERROR(seal_staged_block(upload->name, upload->payload, upload->bytes));
  }
  auto version = new_version();
  version->version = upload->version.value_or(current + 1);
  version->bytes = upload->bytes;
  version->arrays_json = value_arrays_json(upload->arrays);
  version->arrays = std::move(upload->arrays);
  if (upload->payload.memfd.valid() && !upload->staged) {
    // Nobody writes it any more: no new writable mapping or write(), by anyone.
    REPLAYD_RETURN_IF_ERROR(
        shm::seal_memfd(upload->payload.memfd.get(), shm::Writers::server_only));
  }
  version->payload = std::move(upload->payload);
  version->published_at = std::chrono::steady_clock::now();
  if (value->current) committed_bytes_ -= value->current->bytes;
  committed_bytes_ += version->bytes;
  upload_bytes_ -= upload->bytes;
  uploads_.erase(id);
  value->current = std::move(version);
  ++publishes_;
  value->fetchers.wake_all();
  return value.get();
}

std::vector<SnapshotValueOut> ValueStore::snapshot_values() const {
  std::vector<SnapshotValueOut> out;
  for (const auto& [name, value] : values_) {
    if (!value->current) continue;
    const ValueVersion& current = *value->current;
    SnapshotValueOut saved{name, current.version, {}, current.bytes, {}};
    for (const ValueArray& array : current.arrays)
      saved.arrays.push_back({array.name, array.dtype, array.shape, array.offset, array.bytes});
    saved.parts = current.payload.pieces();
    out.push_back(std::move(saved));
  }
  return out;
}

Status ValueStore::restore(SnapshotValueIn saved) {
  if (!is_valid_value_name(saved.name))
    return make_error(ErrorCode::invalid_argument, "'" + saved.name + "' " + not_a_value_name());
  if (saved.bytes > limits_.max_value_bytes) {
    return make_error(ErrorCode::resource_exhausted, std::to_string(saved.bytes) +
                                                         " bytes, more than max_value_bytes = " +
                                                         std::to_string(limits_.max_value_bytes));
  }
  if (held_bytes() + saved.bytes > limits_.max_values_bytes) {
    return make_error(ErrorCode::resource_exhausted,
                      "beside the values restored before it, more than max_values_bytes = " +
                          std::to_string(limits_.max_values_bytes));
  }
  if (!values_.contains(saved.name) && values_.size() >= limits_.max_values) {
    return make_error(ErrorCode::resource_exhausted,
                      "more than max_values = " + std::to_string(limits_.max_values) + " names");
  }
  auto version = new_version();
  version->version = saved.version;
  version->bytes = saved.bytes;
  for (SnapshotValueArray& array : saved.arrays) {
    version->arrays.push_back(
        {std::move(array.name), array.dtype, std::move(array.shape), array.offset, array.bytes});
  }
  version->arrays_json = value_arrays_json(version->arrays);
  if (saved.bytes > 0 && shared_memory_) {
    // At start, before anything is served: the copy into the block may take its time.
    auto memfd = shm::create_memfd("replayd value " + saved.name, saved.bytes);
    auto mapping =
        memfd ? shm::Mapping::map(memfd->get(), saved.bytes) : Result<shm::Mapping>(memfd.error());
    if (mapping) {
      std::memcpy(mapping->bytes().data(), saved.payload.get(), saved.bytes);
      REPLAYD_RETURN_IF_ERROR(shm::seal_memfd(memfd->get(), shm::Writers::server_only));
      version->payload.memfd = std::move(memfd).value();
      version->payload.mapping = std::move(mapping).value();
    }
  }
  if (saved.bytes > 0 && !version->payload.memfd.valid())
    version->payload.parts.emplace_back(std::move(saved.payload), saved.bytes);
  version->published_at = std::chrono::steady_clock::now();
  std::shared_ptr<PublishedValue>& slot = values_[saved.name];
  if (!slot) {
    slot = std::make_shared<PublishedValue>();
    slot->name = saved.name;
  }
  if (slot->current) committed_bytes_ -= slot->current->bytes;
  committed_bytes_ += version->bytes;
  slot->current = std::move(version);
  return Ok{};
}

void ValueStore::end_connection(std::uint64_t connection) {
  for (auto it = uploads_.begin(); it != uploads_.end();) {
    if (it->second.connection == connection) {
      upload_bytes_ -= it->second.bytes;
      release_payload(std::move(it->second.payload), it->second.bytes);
      it = uploads_.erase(it);
    } else {
      ++it;
    }
  }
}

void ValueStore::cancel_all(CancelReason reason) {
  for (auto& [name, value] : values_)
    value->fetchers.cancel_all(reason);
}

}  // namespace replayd::service
