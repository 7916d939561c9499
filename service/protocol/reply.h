// Replies as they go on the wire, and the one place where engine errors become wire error
// codes (docs/PROTOCOL.md, "Requests and replies").
#pragma once

#include <array>
#include <asio/buffer.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "service/protocol/byte_buffer.h"
#include "service/protocol/unique_fd.h"
#include "service/protocol/wire_frame.h"

namespace replayd::service {

enum class WireError {
  invalid_argument,
  not_found,
  already_exists,
  timeout,
  resource_exhausted,
  shutting_down,
  protocol_error,
  unauthenticated,
  permission_denied
};

// Every code, in the order docs/PROTOCOL.md lists them.
inline constexpr std::array kWireErrors{
    WireError::invalid_argument, WireError::not_found,          WireError::already_exists,
    WireError::timeout,          WireError::resource_exhausted, WireError::shutting_down,
    WireError::protocol_error,   WireError::unauthenticated,    WireError::permission_denied};

const char* wire_error_name(WireError code);
// Maps an engine error to its wire code. would_block only reaches the wire when a request
// asked not to wait (timeout_ms 0), so it maps to timeout.
WireError wire_error_of(ErrorCode code);

// One reply frame: header bytes, JSON metadata and payload.
//
// Borrowed rows: when `pieces` is not empty, the payload on the wire is those pieces in
// order instead of `payload`: ranges of `payload` and views of rows in table storage.
// A view is valid only until the io_context runs another handler (an insert may overwrite
// the row), so such a reply must be written at once or settled (copied into `payload`)
// before anything else runs; Session::send does one or the other.
//
// Descriptors: a reply may carry file descriptors (the shared-memory plane's memfds,
// docs/SHM.md); they go with the frame's first byte (sendmsg, SCM_RIGHTS), and the reply
// owns them until then.
struct Reply {
  std::uint64_t request_id = 0;
  std::array<std::byte, kHeaderBytes> header{};
  std::string meta;
  ByteBuffer payload;
  std::vector<std::span<const std::byte>> pieces;
  std::vector<UniqueFd> descriptors;
  // Counts the descriptors against their budgets (ConnectionPlane::hold_descriptor_reply)
  // until they are written or the reply is discarded; opaque here.
  std::shared_ptr<void> descriptor_hold;
  // Keeps alive the memory `pieces` view when that memory is not table storage (a
  // published value's version): such pieces stay valid however long the reply waits, so
  // the reply is never settled (copied) before it is written.
  std::shared_ptr<const void> pinned;
  // The header and metadata went out already and `payload` holds the rest of the frame
  // (what settle(written) leaves after a partial write).
  bool remainder_only = false;
  bool is_error = false;
  std::string_view error_code;  // static string; empty unless is_error

  // Whether the reply views table rows that it must write or copy before anything else runs.
  bool borrows() const { return !pieces.empty() && !pinned; }
  std::size_t payload_bytes() const;
  // Bytes still to write.
  std::size_t wire_bytes() const {
    return remainder_only ? payload.size() : kHeaderBytes + meta.size() + payload_bytes();
  }
  // Appends the frame's bytes still to write to `out`, in order. Valid until the reply
  // changes.
  void gather(std::vector<asio::const_buffer>& out) const;
  // Makes the reply own every byte after the first `written` of its frame: copies borrowed
  // rows (and, after a partial write, the unwritten rest of header and metadata) into
  // `payload`. O(bytes copied). Precondition: written < wire_bytes().
  void settle(std::size_t written = 0);
};

Reply make_reply(std::uint64_t request_id, std::string meta, ByteBuffer payload = {});
Reply make_error_reply(std::uint64_t request_id, WireError code, std::string_view message);
Reply make_error_reply(std::uint64_t request_id, const Error& error);

}  // namespace replayd::service
