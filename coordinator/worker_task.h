#ifndef TESSERA_COORDINATOR_WORKER_TASK_H_
#define TESSERA_COORDINATOR_WORKER_TASK_H_

#include <string>

#include "absl/status/status.h"
#include "coordinator/worker_stub.h"
#include "proto/worker_service.pb.h"

namespace tessera {

// A worker as the training job drives it: the steps, health checks and
// restores of WorkerStub, plus what the job asks of it besides steps. The
// gRPC implementation is RemoteWorker; tests substitute their own.
//
// Thread safety: implementations must allow concurrent calls.
class WorkerTask : public WorkerStub {
 public:
  virtual const std::string& address() const = 0;
  // Gives the worker its part of the job; a later Restore sends it again.
  virtual absl::Status Configure(const WorkerConfig& config,
                                 ConfigureResponse* response) = 0;
  virtual absl::Status Evaluate(const EvaluateRequest& request,
                                EvaluateResponse* response) = 0;
  virtual absl::Status Health(HealthResponse* response, double timeout_s) = 0;
  virtual absl::Status Shutdown(const std::string& reason) = 0;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_WORKER_TASK_H_
