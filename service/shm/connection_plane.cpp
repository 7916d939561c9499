#include "service/shm/connection_plane.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace replayd::service::shm {

PlaneAccess plane_access(int socket_fd, bool enabled) {
  if (!enabled) return {false, "the server runs with shared_memory off"};
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  if (::getsockname(socket_fd, reinterpret_cast<sockaddr*>(&local), &length) != 0 ||
      local.ss_family != AF_UNIX) {
    return {false, "shared memory is offered on Unix sockets only, not over TCP"};
  }
  ucred peer{};
  socklen_t peer_length = sizeof(peer);
  if (::getsockopt(socket_fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) != 0) {
    return {false, "the peer's credentials could not be read (SO_PEERCRED)"};
  }
  if (peer.uid != ::geteuid()) {
    return {false, "shared memory is offered only to clients of the server's uid (" +
                       std::to_string(::geteuid()) + "), this client's is " +
                       std::to_string(peer.uid)};
  }
  return {true, ""};
}

namespace {

std::uint64_t whole_pages(std::uint64_t bytes) {
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

Error exhausted(std::string message) {
  return make_error(ErrorCode::resource_exhausted, std::move(message));
}

}  // namespace

void PlaneBudget::block_dropped(std::uint64_t block) {
  auto it = sent_blocks.find(block);
  if (it == sent_blocks.end() || it->second.dropped) return;
  it->second.dropped = true;
  dropped_block_bytes += it->second.bytes;
}

ConnectionPlane::ConnectionPlane(int socket_fd, PlaneAccess access, PlaneBudget& budget,
                                 ConnectionPlaneLimits limits)
    : socket_fd_(socket_fd), access_(std::move(access)), budget_(budget), limits_(limits) {}

ConnectionPlane::~ConnectionPlane() {
  budget_.staging_bytes -= held_bytes_;
  budget_.arenas -= arenas_.size();
  for (const auto& [block, bytes] : blocks_sent_) {
    auto it = budget_.sent_blocks.find(block);
    if (it == budget_.sent_blocks.end()) continue;
    if (--it->second.holders == 0) {
      if (it->second.dropped) budget_.dropped_block_bytes -= it->second.bytes;
      budget_.sent_blocks.erase(it);
    }
  }
}

Status ConnectionPlane::require_offered(std::string_view what) const {
  if (access_.offered) return Ok{};
  return make_error(ErrorCode::permission_denied,
                    std::string(what) +
                        " needs the shared-memory data plane, which this "
                        "connection does not have: " +
                        access_.reason);
}

Result<ArenaGrant> ConnectionPlane::create_arena(std::uint64_t bytes) {
  REPLAYD_RETURN_IF_ERROR(require_offered("map_staging"));
  if (bytes == 0 || bytes > limits_.max_staging_bytes) {
    return make_error(ErrorCode::invalid_argument,
                      "bytes must be between 1 and max_staging_bytes_per_connection = " +
                          std::to_string(limits_.max_staging_bytes) + ", got " +
                          std::to_string(bytes));
  }
  // An arena costs whole pages of host memory and a mapping, however few bytes it asks.
  const std::uint64_t counted = whole_pages(bytes);
  if (arenas_.size() >= limits_.max_arenas) {
    return exhausted("this connection holds " + std::to_string(arenas_.size()) +
                     " staging arenas, max_staging_arenas_per_connection = " +
                     std::to_string(limits_.max_arenas) +
                     " (unmap_staging the ones not in use, or use one larger arena)");
  }
  if (held_bytes_ + counted > limits_.max_staging_bytes) {
    return exhausted("this connection's staging arenas hold " + std::to_string(held_bytes_) +
                     " bytes (whole pages); " + std::to_string(counted) +
                     " more exceed max_staging_bytes_per_connection = " +
                     std::to_string(limits_.max_staging_bytes) +
                     " (unmap_staging the ones not in use)");
  }
  if (budget_.arenas >= budget_.max_arenas) {
    return exhausted("the server's connections hold " + std::to_string(budget_.arenas) +
                     " staging arenas, max_staging_arenas = " + std::to_string(budget_.max_arenas));
  }
  if (budget_.staging_bytes + counted > budget_.max_staging_bytes) {
    return exhausted("the server's staging arenas hold " + std::to_string(budget_.staging_bytes) +
                     " bytes; " + std::to_string(counted) + " more exceed max_staging_bytes = " +
                     std::to_string(budget_.max_staging_bytes));
  }
  const std::uint64_t id = next_id_++;
  REPLAYD_ASSIGN_OR_RETURN(UniqueFd fd,
                           create_memfd("replayd staging " + std::to_string(id), bytes));
  REPLAYD_RETURN_IF_ERROR(seal_memfd(fd.get(), Writers::anyone));
  REPLAYD_ASSIGN_OR_RETURN(Mapping mapping, Mapping::map(fd.get(), bytes));
  auto arena = std::make_shared<StagingArena>(StagingArena{id, std::move(mapping), counted});
  arenas_.emplace(id, arena);
  held_bytes_ += counted;
  budget_.staging_bytes += counted;
  ++budget_.arenas;
  return ArenaGrant{std::move(arena), std::move(fd)};
}

bool ConnectionPlane::release_arena(std::uint64_t id) {
  auto it = arenas_.find(id);
  if (it == arenas_.end()) return false;
  const std::uint64_t bytes = it->second->counted_bytes;
  held_bytes_ -= bytes;
  budget_.staging_bytes -= bytes;
  --budget_.arenas;
  arenas_.erase(it);
  return true;
}

Result<std::shared_ptr<void>> ConnectionPlane::hold_descriptor_reply() {
  int unsent = 0;
  // Nothing left in the client's receive queue: it has read every reply written so far.
  if (replies_->unread > 0 && ::ioctl(socket_fd_, SIOCOUTQ, &unsent) == 0 && unsent == 0)
    replies_->unread = 0;
  const std::uint64_t pending = replies_->queued + replies_->unread;
  if (pending >= limits_.max_unread_descriptors) {
    return exhausted("this connection has " + std::to_string(pending) +
                     " replies carrying descriptors that it has not read, "
                     "max_unread_descriptors_per_connection = " +
                     std::to_string(limits_.max_unread_descriptors) +
                     " (read the replies to map_table and map_staging before asking again)");
  }
  if (budget_.queued_descriptors >= budget_.max_queued_descriptors) {
    return exhausted("the server holds " + std::to_string(budget_.queued_descriptors) +
                     " descriptors in replies not yet written, max_queued_descriptors = " +
                     std::to_string(budget_.max_queued_descriptors));
  }
  ++replies_->queued;
  ++budget_.queued_descriptors;
  // Released when the reply's descriptor is written or the reply is discarded.
  PlaneBudget* budget = &budget_;
  return std::shared_ptr<void>(nullptr, [budget, replies = replies_](void*) {
    --replies->queued;
    ++replies->unread;
    --budget->queued_descriptors;
  });
}

void ConnectionPlane::block_sent(std::uint64_t block, std::uint64_t bytes) {
  if (!blocks_sent_.emplace(block, bytes).second) return;
  SentBlock& sent = budget_.sent_blocks[block];
  sent.bytes = bytes;
  ++sent.holders;
}

Result<std::shared_ptr<StagingArena>> ConnectionPlane::find_arena(std::uint64_t arena,
                                                                  std::string_view use,
                                                                  std::string_view key) const {
  REPLAYD_RETURN_IF_ERROR(require_offered(use));
  auto it = arenas_.find(arena);
  if (it == arenas_.end()) {
    return make_error(ErrorCode::invalid_argument,
                      std::string(key) + ": this connection has no staging arena " +
                          std::to_string(arena) + " (map_staging creates one)");
  }
  return it->second;
}

Result<StagedBytes> ConnectionPlane::staged_bytes(std::uint64_t arena) const {
  REPLAYD_ASSIGN_OR_RETURN(auto found, find_arena(arena, "a staged payload", "staged.arena"));
  return StagedBytes{found->mapping.bytes(), found};
}

Result<ArenaTarget> ConnectionPlane::reply_target(std::uint64_t arena) const {
  REPLAYD_ASSIGN_OR_RETURN(auto found,
                           find_arena(arena, "a reply into a staging arena", "into.arena"));
  return ArenaTarget{found->mapping.bytes(), found};
}

}  // namespace replayd::service::shm
