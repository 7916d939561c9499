// Releasing large blocks off the io_context thread: unmapping or freeing a published value
// or a dropped table of a gigabyte takes the kernel tens to hundreds of milliseconds (every
// page is given back), which the thread that serves every client must not spend. The
// release thread runs at nice +10 (ThreadPriority::background). release_in_background
// queues the release for one long-lived thread; small blocks are released at once.
// Threading: release_in_background may be called from any thread; the releases run on the
// release thread, in order. The thread starts with the first release and is joined at exit
// (after the queue is drained).
#pragma once

#include <functional>

namespace replayd::service {

// Runs `release` on the release thread. `release` must touch nothing but what it owns.
void release_in_background(std::function<void()> release);

}  // namespace replayd::service
