// copy_cell: copies one field value of one item (a cell) between a table column and a batch.
// The hot loops of insert and sample copy every field of every row; most fields are 1 to 16
// bytes (actions, rewards, flags, small observations), where a call to memcpy with a runtime
// size costs more than the copy. Those sizes compile to a fixed-size copy; the rest call
// memcpy. Pure; no alignment is assumed (the copies are byte-wise in meaning).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace replayd {

inline void copy_cell(std::byte* to, const std::byte* from, std::uint64_t bytes) {
  switch (bytes) {
    case 1:
      *to = *from;
      return;
    case 2:
      std::memcpy(to, from, 2);
      return;
    case 4:
      std::memcpy(to, from, 4);
      return;
    case 8:
      std::memcpy(to, from, 8);
      return;
    case 12:
      std::memcpy(to, from, 12);
      return;
    case 16:
      std::memcpy(to, from, 16);
      return;
    default:
      std::memcpy(to, from, bytes);
  }
}

}  // namespace replayd
