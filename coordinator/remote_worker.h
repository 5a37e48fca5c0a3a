#ifndef TESSERA_COORDINATOR_REMOTE_WORKER_H_
#define TESSERA_COORDINATOR_REMOTE_WORKER_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/rpc/grpc_channel.h"
#include "coordinator/worker_task.h"
#include "proto/worker_service.grpc.pb.h"

namespace tessera {

// A worker reached over gRPC. It remembers the configuration it last sent,
// so a worker that restarts can be configured again (Restore).
//
// Thread safety: all methods may be called concurrently.
class RemoteWorker final : public WorkerTask {
 public:
  // Calls go through `channel` (MakeChannel with the job's security);
  // those other than health checks get `timeout_s` (--rpc_timeout_s).
  RemoteWorker(std::string address, int task_index,
               std::shared_ptr<grpc::Channel> channel,
               double timeout_s = kDefaultRpcTimeoutS);

  const std::string& address() const override { return address_; }

  absl::Status Configure(const WorkerConfig& config,
                         ConfigureResponse* response) override;
  absl::Status Evaluate(const EvaluateRequest& request,
                        EvaluateResponse* response) override;
  absl::Status Health(HealthResponse* response, double timeout_s) override;
  absl::Status Shutdown(const std::string& reason) override;
  absl::Status SaveReplica(const SaveShardsRequest& request,
                           SaveShardsResponse* response) override;
  absl::Status RestoreReplica(const RestoreReplicaRequest& request,
                              RestoreShardsResponse* response) override;
  void Interrupt(const std::string& reason) override;

  absl::Status RunStep(const StepRequest& request,
                       StepResponse* response) override;
  // One RunSteps call; the deadline is the per-call timeout for each step.
  absl::Status RunSteps(
      const StepsRequest& request,
      const std::function<void(int, StepResponse)>& done) override;
  WorkerHealth Probe() override;
  absl::Status Restore() override;

 private:
  std::string Peer(const char* call) const;
  // One unary call of the Worker service, with a deadline `timeout_s`
  // away; its error names the worker and `name`.
  template <typename Request, typename Response>
  absl::Status Call(grpc::Status (Worker::Stub::*method)(grpc::ClientContext*,
                                                         const Request&,
                                                         Response*),
                    const char* name, const Request& request,
                    Response* response, double timeout_s);

  const std::string address_;
  const int task_index_;
  const double timeout_s_;
  std::unique_ptr<Worker::Stub> rpc_;
  absl::Mutex mu_;
  WorkerConfig config_ ABSL_GUARDED_BY(mu_);
  bool configured_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_REMOTE_WORKER_H_
