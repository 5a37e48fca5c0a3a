#ifndef TESSERA_COORDINATOR_WORKER_COMEBACK_H_
#define TESSERA_COORDINATOR_WORKER_COMEBACK_H_

#include <functional>

#include "absl/time/time.h"
#include "coordinator/worker_stub.h"

namespace tessera {

// How waiting for a failed worker ended.
enum class Comeback {
  kBack,      // it answers, its configuration restored if it had lost it
  kGaveUp,    // give_up() said to stop waiting
  kTimedOut,  // not back by the deadline
};

// Probes `remote` (worker `worker`), with backoff, until it is back,
// `give_up()` (asked before each probe) returns true, or `deadline` passes.
// A worker that answers but lost its configuration is restored first;
// one that cannot be yet is probed again.
Comeback AwaitComeback(int worker, WorkerStub* remote, absl::Time deadline,
                       const std::function<bool()>& give_up);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_WORKER_COMEBACK_H_
