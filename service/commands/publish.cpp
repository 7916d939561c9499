// `publish_begin`, `publish_part`, `publish_commit` (docs/PROTOCOL.md, "Published values"):
// a value published in pieces so that no request holds the thread long. The store
// (service/values/value_store.h) checks every budget at the begin and keeps each part's
// payload as it arrived (moved out of the request frame, never copied).
#include <fcntl.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>

#include "service/commands/handlers.h"
#include "service/shm/connection_plane.h"
#include "service/shm/memfd.h"
#include "service/values/policy_versions.h"
#include "service/values/value_store.h"
#include "service/waiting/off_thread.h"

namespace replayd::service::commands {
namespace {

// Longest a staged publish_begin waits for its block's pages to be allocated.
constexpr std::chrono::milliseconds kMaxAllocationWait{100};

// Threads allocating a staged block's pages that have not finished (they may outlive the
// request that started them). Read on the io_context thread, decremented on theirs.
std::atomic<int>& staged_allocations_running() {
  static std::atomic<int> running{0};
  return running;
}

// The "arrays" of a publish_begin: [{"name", "dtype", "shape"}, ...] (offsets are the
// store's).
Result<std::vector<ValueArray>> read_arrays(Call& call) {
  const boost::json::value* value = call.args.value("arrays");
  if (value == nullptr || !value->is_array()) {
    return call.args.error("arrays", "expected a list of {\"name\", \"dtype\", \"shape\"} objects");
  }
  std::vector<ValueArray> arrays;
  for (const boost::json::value& item : value->as_array()) {
    const boost::json::object* object = item.if_object();
    const boost::json::value* name = object ? object->if_contains("name") : nullptr;
    const boost::json::value* dtype = object ? object->if_contains("dtype") : nullptr;
    const boost::json::value* shape = object ? object->if_contains("shape") : nullptr;
    if (!name || !name->is_string() || !dtype || !dtype->is_string() || !shape ||
        !shape->is_array() || object->size() != 3) {
      return call.args.error("arrays",
                             "each array is {\"name\": string, \"dtype\": string, \"shape\": "
                             "[dims]} and nothing else");
    }
    ValueArray array;
    array.name = std::string(name->as_string());
    const auto parsed = parse_dtype(std::string_view(dtype->as_string()));
    if (!parsed) {
      return call.args.error("arrays", "array '" + array.name + "': unknown dtype '" +
                                           std::string(dtype->as_string()) + "'");
    }
    array.dtype = *parsed;
    for (const boost::json::value& dim : shape->as_array()) {
      const auto* size = dim.if_uint64();
      const auto* signed_size = dim.if_int64();
      if (!size && !(signed_size && *signed_size >= 0)) {
        return call.args.error("arrays", "array '" + array.name + "': a shape holds integers >= 0");
      }
      array.shape.push_back(size ? *size : static_cast<std::uint64_t>(*signed_size));
    }
    arrays.push_back(std::move(array));
  }
  return arrays;
}

}  // namespace

asio::awaitable<Result<Reply>> publish_begin(Call& call) {
  REPLAYD_CO_ASSIGN_OR_RETURN(std::string name, call.args.string("name"));
  std::optional<std::uint64_t> version;
  if (const auto* given = call.args.value("version"); given && !given->is_null()) {
    REPLAYD_CO_ASSIGN_OR_RETURN(version, call.args.optional_uint("version"));
    if (version && *version == 0) co_return call.args.error("version", "versions start at 1");
  }
  REPLAYD_CO_ASSIGN_OR_RETURN(std::vector<ValueArray> arrays, read_arrays(call));
  REPLAYD_CO_ASSIGN_OR_RETURN(const bool staged, call.args.boolean_or("staged", false));
  std::shared_ptr<void> hold;
  if (staged) {
    // The block goes to the publisher as a descriptor, counted like map_staging's.
    if (call.plane == nullptr) {
      co_return make_error(ErrorCode::permission_denied,
                           "a staged publish needs a client connection");
    }
    REPLAYD_CO_RETURN_IF_ERROR(call.plane->require_offered("a staged publish_begin"));
    REPLAYD_CO_ASSIGN_OR_RETURN(hold, call.plane->hold_descriptor_reply());
  }
  REPLAYD_CO_ASSIGN_OR_RETURN(
      UploadTicket ticket,
      call.service.values.begin(call.writer, name, version, std::move(arrays), staged));
  std::optional<UniqueFd> block;
  if (ticket.block_fd >= 0) {
    REPLAYD_CO_ASSIGN_OR_RETURN(block, shm::duplicate(ticket.block_fd));
  }
  // Built before any suspension: ticket.arrays is valid only until the store's next call.
  std::string meta = "{\"upload\":" + std::to_string(ticket.id) +
                     ",\"bytes\":" + std::to_string(ticket.bytes) +
                     ",\"arrays\":" + value_arrays_json(*ticket.arrays) +
                     (block ? ",\"staged\":true,\"descriptors\":1}" : ",\"staged\":false}");
  if (block && staged_allocations_running().load() == 0) {
    // The block's pages are allocated (and zeroed by the kernel) on an idle-priority thread
    // of the server's before the publisher gets it, so that its core only copies. The
    // reply waits for it kMaxAllocationWait at most (a saturated core starves the thread):
    // the publisher's page faults allocate what is left meanwhile, beside the thread, which
    // goes on. One such thread at a time: a publish that finds one running skips it. A
    // failure leaves the pages to the publisher too.
    auto own = shm::duplicate(block->get());
    if (own) {
      ++staged_allocations_running();
      std::function<int()> allocate = [fd = std::make_shared<UniqueFd>(std::move(own).value()),
                                       bytes = ticket.bytes] {
        const int result = ::fallocate(fd->get(), 0, 0, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
        --staged_allocations_running();
        return result;
      };
      (void)co_await run_off_thread_for(std::move(allocate), kMaxAllocationWait);
    }
  }
  Reply reply = reply_with(call, std::move(meta));
  if (block) {
    reply.descriptors.push_back(std::move(*block));
    reply.descriptor_hold = std::move(hold);
  }
  co_return reply;
}

asio::awaitable<Result<Reply>> publish_part(Call& call) {
  REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t upload, call.args.uint("upload"));
  REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t offset, call.args.uint("offset"));
  REPLAYD_CO_ASSIGN_OR_RETURN(
      std::uint64_t received,
      call.service.values.add_part(call.writer, upload, offset, std::move(call.frame.payload)));
  co_return reply_with(call, "{\"received\":" + std::to_string(received) + "}");
}

asio::awaitable<Result<Reply>> publish_commit(Call& call) {
  REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t upload, call.args.uint("upload"));
  REPLAYD_CO_ASSIGN_OR_RETURN(const PublishedValue* value,
                              call.service.values.commit(call.writer, upload));
  call.service.metrics.value_published(value->name, value->version(), value->current->bytes);
  follow_committed_value(call.service, *value);
  co_return reply_with(call,
                       "{\"name\":" + boost::json::serialize(boost::json::string(value->name)) +
                           ",\"version\":" + std::to_string(value->version()) + "}");
}

}  // namespace replayd::service::commands
