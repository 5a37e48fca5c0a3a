#ifndef TESSERA_COORDINATOR_TAKEN_STEPS_H_
#define TESSERA_COORDINATOR_TAKEN_STEPS_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/schedule/step_queue.h"
#include "coordinator/worker_stub.h"
#include "proto/worker_service.pb.h"

namespace tessera {

// Runs the steps a worker took on `remote`: RunStep for one, else one
// RunSteps call with them all (*request, reused, holds their copies).
// `done(i, response)` is called for each step that finished, in order and
// each once, as soon as it finished; *finished counts them. Returns the
// error of the first step that failed (an Internal error when the worker
// finished fewer than all and reported none).
absl::Status RunTakenSteps(
    int worker, WorkerStub* remote, const std::vector<QueuedStep>& taken,
    StepsRequest* request,
    const std::function<void(size_t, StepResponse)>& done, size_t* finished);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_TAKEN_STEPS_H_
