#include "service/shm/connection_plane.h"

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

ConnectionPlane::ConnectionPlane(PlaneAccess access, StagingBudget& budget,
                                 std::uint64_t max_bytes_per_connection)
    : access_(std::move(access)), budget_(budget), max_bytes_(max_bytes_per_connection) {}

ConnectionPlane::~ConnectionPlane() {
  budget_.held -= held_;
}

Status ConnectionPlane::require_offered(std::string_view what) const {
  if (access_.offered) return Ok{};
  return make_error(ErrorCode::permission_denied,
                    std::string(what) +
                        " needs the shared-memory data plane, which this "
                        "connection does not have: " +
                        access_.reason);
}

Result<std::shared_ptr<StagingArena>> ConnectionPlane::create_arena(std::uint64_t bytes) {
  REPLAYD_RETURN_IF_ERROR(require_offered("map_staging"));
  if (bytes == 0 || bytes > max_bytes_) {
    return make_error(ErrorCode::invalid_argument,
                      "bytes must be between 1 and max_staging_bytes_per_connection = " +
                          std::to_string(max_bytes_) + ", got " + std::to_string(bytes));
  }
  if (held_ + bytes > max_bytes_) {
    return make_error(ErrorCode::resource_exhausted,
                      "this connection's staging arenas hold " + std::to_string(held_) +
                          " bytes; " + std::to_string(bytes) +
                          " more exceed max_staging_bytes_per_connection = " +
                          std::to_string(max_bytes_) + " (unmap_staging the ones not in use)");
  }
  if (budget_.held + bytes > budget_.limit) {
    return make_error(ErrorCode::resource_exhausted,
                      "the server's staging arenas hold " + std::to_string(budget_.held) +
                          " bytes; " + std::to_string(bytes) +
                          " more exceed max_staging_bytes = " + std::to_string(budget_.limit));
  }
  const std::uint64_t id = next_id_++;
  auto fd = create_sealed_memfd("replayd staging " + std::to_string(id), bytes);
  if (!fd) return fd.error();
  auto mapping = Mapping::map(fd->get(), bytes);
  if (!mapping) return mapping.error();
  auto arena = std::make_shared<StagingArena>(
      StagingArena{id, std::move(fd).value(), std::move(mapping).value()});
  arenas_.emplace(id, arena);
  held_ += bytes;
  budget_.held += bytes;
  return arena;
}

bool ConnectionPlane::release_arena(std::uint64_t id) {
  auto it = arenas_.find(id);
  if (it == arenas_.end()) return false;
  const std::uint64_t bytes = it->second->mapping.bytes().size();
  held_ -= bytes;
  budget_.held -= bytes;
  arenas_.erase(it);
  return true;
}

Result<StagedBytes> ConnectionPlane::staged_bytes(std::uint64_t arena) const {
  REPLAYD_RETURN_IF_ERROR(require_offered("a staged payload"));
  auto it = arenas_.find(arena);
  if (it == arenas_.end()) {
    return make_error(ErrorCode::invalid_argument,
                      "staged.arena: this connection has no staging arena " +
                          std::to_string(arena) + " (map_staging creates one)");
  }
  return StagedBytes{it->second->mapping.bytes(), it->second};
}

}  // namespace replayd::service::shm
