#ifndef TESSERA_WORKER_WORKER_SERVICE_H_
#define TESSERA_WORKER_WORKER_SERVICE_H_

#include <atomic>
#include <functional>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/rpc/rpc_auth.h"
#include "common/serial_executor.h"
#include "proto/worker_service.grpc.pb.h"
#include "worker/training_worker.h"

namespace tessera {

// The Worker gRPC service. Configure, RunStep(s) and Evaluate run one at a
// time on the service's own thread (they block on pulls and pushes);
// Health and Shutdown answer at once. Shutdown only signals
// shutdown_requested(); the owner stops the server. Every method first
// checks the job token with `auth` and refuses a call without it
// (UNAUTHENTICATED), touching nothing.
class WorkerService final : public Worker::CallbackService {
 public:
  WorkerService(TrainingWorker* worker, int task_index, RpcAuth auth);

  absl::Notification& shutdown_requested() { return shutdown_; }

  grpc::ServerUnaryReactor* Configure(grpc::CallbackServerContext* context,
                                      const WorkerConfig* request,
                                      ConfigureResponse* response) override;
  grpc::ServerUnaryReactor* RunStep(grpc::CallbackServerContext* context,
                                    const StepRequest* request,
                                    StepResponse* response) override;
  grpc::ServerWriteReactor<StepResponse>* RunSteps(
      grpc::CallbackServerContext* context,
      const StepsRequest* request) override;
  grpc::ServerUnaryReactor* Evaluate(grpc::CallbackServerContext* context,
                                     const EvaluateRequest* request,
                                     EvaluateResponse* response) override;
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context,
                                   const HealthRequest* request,
                                   HealthResponse* response) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* context,
                                     const ShutdownRequest* request,
                                     ShutdownResponse* response) override;
  // Between steps, on the same executor.
  grpc::ServerUnaryReactor* SaveReplica(grpc::CallbackServerContext* context,
                                        const SaveShardsRequest* request,
                                        SaveShardsResponse* response) override;
  grpc::ServerUnaryReactor* RestoreReplica(
      grpc::CallbackServerContext* context,
      const RestoreReplicaRequest* request,
      RestoreShardsResponse* response) override;
  // At once, beside a step in progress.
  grpc::ServerUnaryReactor* Interrupt(grpc::CallbackServerContext* context,
                                      const InterruptRequest* request,
                                      InterruptResponse* response) override;

 private:
  // Checks the job's token for Worker.`method`, then runs `call` on the
  // executor, after the calls before it, and finishes with its status
  // (logged when it failed).
  grpc::ServerUnaryReactor* OnExecutor(grpc::CallbackServerContext* context,
                                       const char* method,
                                       std::function<absl::Status()> call);

  TrainingWorker* const worker_;
  const int task_index_;
  const RpcAuth auth_;
  const absl::Time start_ = absl::Now();
  std::atomic<bool> shutdown_called_{false};
  absl::Notification shutdown_;
  SerialExecutor executor_;  // last: drained before the rest goes away
};

}  // namespace tessera

#endif  // TESSERA_WORKER_WORKER_SERVICE_H_
