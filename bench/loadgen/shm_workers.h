// W1/W2 explorer and learner loops over the shared-memory data plane (docs/SHM.md); workers.h
// runs them with --shm. The explorer copies each request's items into a slot of its staging
// arena (one copy of every byte, as an explorer writing an environment's observation would)
// and sends a staged insert naming the slot; `depth` requests in flight use depth + 1 slots
// in turn, so a slot is rewritten only after its request's reply. The learner keeps `depth`
// keys-only samples in flight and gathers each batch's rows from the table's mapping into
// its own arrays, drawing again (one synchronous request) the rows that changed under the
// copy. Both throw client::Error when the plane is not offered (TCP, another uid).
// Threading: each loop belongs to one worker process's main thread.
#pragma once

#include "workers.h"

namespace replayd::loadgen {

WorkerResult run_shm_explorer(const WorkerPlan& plan, void (*wait_for_start)(void*), void* context);
WorkerResult run_shm_learner(const WorkerPlan& plan, void (*wait_for_start)(void*), void* context);

}  // namespace replayd::loadgen
