#ifndef TESSERA_COORDINATOR_WORKER_TASK_H_
#define TESSERA_COORDINATOR_WORKER_TASK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
  // Mirrored and hybrid jobs: the replica in the job's checkpoints
  // (proto/worker_service.proto). A worker that keeps none answers
  // FailedPrecondition; these defaults are for stand-ins that have none.
  virtual absl::Status SaveReplica(const SaveShardsRequest& request,
                                   SaveShardsResponse* response) {
    return absl::UnimplementedError(
        absl::StrCat("worker ", address(), " cannot save a replica"));
  }
  virtual absl::Status RestoreReplica(const RestoreReplicaRequest& request,
                                      RestoreShardsResponse* response) {
    return absl::UnimplementedError(
        absl::StrCat("worker ", address(), " cannot restore a replica"));
  }
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_WORKER_TASK_H_
