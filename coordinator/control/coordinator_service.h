#ifndef TESSERA_COORDINATOR_CONTROL_COORDINATOR_SERVICE_H_
#define TESSERA_COORDINATOR_CONTROL_COORDINATOR_SERVICE_H_

#include <functional>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/rpc/rpc_auth.h"
#include "coordinator/control/elastic_control.h"
#include "coordinator/control/job_control.h"
#include "proto/coordinator_service.grpc.pb.h"

namespace tessera {

// Lets operators look at and steer a running job (tessera_ctl). `status`
// is called on gRPC's threads and must be thread-safe; `control` is the
// job's mailbox. Both must outlive the server. Every call must carry the
// job's token.
class CoordinatorService final : public Coordinator::CallbackService {
 public:
  // `stop` asks the job to stop after the steps in flight. `elastic`
  // (may be null: AddWorker and DrainWorker are then refused) lets workers
  // join and drain; it must outlive the server too.
  CoordinatorService(std::function<JobStatus()> status, JobControl* control,
                     std::function<void(const std::string&)> stop, RpcAuth auth,
                     ElasticControl* elastic = nullptr)
      : status_(std::move(status)),
        control_(control),
        stop_(std::move(stop)),
        auth_(std::move(auth)),
        elastic_(elastic) {}

  grpc::ServerUnaryReactor* GetJobStatus(grpc::CallbackServerContext* context,
                                         const JobStatusRequest* request,
                                         JobStatus* response) override;
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context,
                                   const HealthRequest* request,
                                   HealthResponse* response) override;
  grpc::ServerUnaryReactor* ScheduleSteps(
      grpc::CallbackServerContext* context, const ScheduleStepsRequest* request,
      ScheduleStepsResponse* response) override;
  // Join and Checkpoint wait for the training loop on a thread of their
  // own, not on one of gRPC's.
  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const JoinRequest* request,
                                 JobStatus* response) override;
  grpc::ServerUnaryReactor* Checkpoint(grpc::CallbackServerContext* context,
                                       const CheckpointRequest* request,
                                       CheckpointResponse* response) override;
  grpc::ServerUnaryReactor* Stop(grpc::CallbackServerContext* context,
                                 const StopRequest* request,
                                 StopResponse* response) override;
  grpc::ServerUnaryReactor* AddWorker(grpc::CallbackServerContext* context,
                                      const AddWorkerRequest* request,
                                      AddWorkerResponse* response) override;
  grpc::ServerUnaryReactor* DrainWorker(grpc::CallbackServerContext* context,
                                        const DrainWorkerRequest* request,
                                        DrainWorkerResponse* response) override;

 private:
  const std::function<JobStatus()> status_;
  JobControl* const control_;
  const std::function<void(const std::string&)> stop_;
  const RpcAuth auth_;
  ElasticControl* const elastic_;
  const absl::Time start_ = absl::Now();
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_CONTROL_COORDINATOR_SERVICE_H_
