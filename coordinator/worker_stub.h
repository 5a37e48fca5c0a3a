#ifndef TESSERA_COORDINATOR_WORKER_STUB_H_
#define TESSERA_COORDINATOR_WORKER_STUB_H_

#include "absl/status/status.h"
#include "proto/worker_service.pb.h"

namespace tessera {

// How the coordinator reaches one worker. The gRPC implementation is
// RemoteWorker; unit tests substitute their own.
class WorkerStub {
 public:
  virtual ~WorkerStub() = default;

  virtual absl::Status RunStep(const StepRequest& request,
                               StepResponse* response) = 0;

  // True when the worker answers a health check promptly. Used to tell a
  // failed worker (re-run its step elsewhere) from a failed step.
  virtual bool Alive() = 0;

  // True when the worker answers but has lost the state it was given (it
  // was restarted between two checks): its failed step is then a worker
  // failure too, re-run after Restore.
  virtual bool LostState() { return false; }

  // Brings a worker that came back (a restarted process has lost its
  // configuration) up to date, so it can take steps again.
  virtual absl::Status Restore() = 0;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_WORKER_STUB_H_
