#ifndef TESSERA_COORDINATOR_WORKER_STUB_H_
#define TESSERA_COORDINATOR_WORKER_STUB_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "proto/worker_service.pb.h"

namespace tessera {

// What one health check of a worker tells (WorkerStub::Probe).
enum class WorkerHealth { kDown, kLostState, kReady };

// How the coordinator reaches one worker. The gRPC implementation is
// RemoteWorker; unit tests substitute their own.
class WorkerStub {
 public:
  virtual ~WorkerStub() = default;

  virtual absl::Status RunStep(const StepRequest& request,
                               StepResponse* response) = 0;

  // Runs `request`'s steps in order, stopping at the first that fails, and
  // calls done(i, response) as step i finishes (before the next one's result is
  // known, so a caller can count it even if the worker dies later). Returns
  // that failure, OK when every step ran. This default makes one RunStep
  // call per step; RemoteWorker makes one call in all.
  virtual absl::Status RunSteps(
      const StepsRequest& request,
      const std::function<void(int, StepResponse)>& done) {
    for (int i = 0; i < request.steps_size(); ++i) {
      StepResponse response;
      if (absl::Status s = RunStep(request.steps(i), &response); !s.ok()) {
        return s;
      }
      done(i, std::move(response));
    }
    return absl::OkStatus();
  }

  // What one health check (one RPC) tells of the worker: it does not
  // answer (a failed step is then re-run elsewhere), it answers but has
  // lost the configuration it was given (it was restarted: its failed step
  // is a worker failure too, re-run after Restore), or it is ready.
  virtual WorkerHealth Probe() = 0;

  // Brings a worker that came back and lost its configuration (Probe said
  // kLostState) up to date, so it can take steps again.
  virtual absl::Status Restore() = 0;

  // Mirrored and hybrid jobs: another worker gave a step up, so this
  // one's all-reduce must not wait for it (proto/worker_service.proto's
  // Interrupt). Returns at once; stand-ins without an all-reduce ignore it.
  virtual void Interrupt(const std::string& reason) {}
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_WORKER_STUB_H_
