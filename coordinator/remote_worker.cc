#include "coordinator/remote_worker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/rpc/backoff.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/short_call_deadline.h"
#include "glog/logging.h"

namespace tessera {

RemoteWorker::RemoteWorker(std::string address, int task_index,
                           std::shared_ptr<grpc::Channel> channel,
                           double timeout_s)
    : address_(std::move(address)),
      task_index_(task_index),
      timeout_s_(timeout_s),
      stub_(Worker::NewStub(std::move(channel))) {}

std::string RemoteWorker::Peer(const char* call) const {
  return absl::StrCat("worker ", task_index_, " (", address_, ") ", call);
}

absl::Status RemoteWorker::Configure(const WorkerConfig& config,
                                     ConfigureResponse* response) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout_s_);
  absl::Status status = FromGrpcStatus(
      stub_->Configure(&context, config, response), Peer("Configure"));
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    config_ = config;
    configured_ = true;
  }
  return status;
}

absl::Status RemoteWorker::Evaluate(const EvaluateRequest& request,
                                    EvaluateResponse* response) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout_s_);
  return FromGrpcStatus(stub_->Evaluate(&context, request, response),
                        Peer("Evaluate"));
}

absl::Status RemoteWorker::Health(HealthResponse* response, double timeout_s) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout_s);
  return FromGrpcStatus(stub_->Health(&context, HealthRequest(), response),
                        Peer("Health"));
}

absl::Status RemoteWorker::Shutdown(const std::string& reason) {
  grpc::ClientContext context;
  SetDeadline(&context, kShortCallDeadlineS);
  ShutdownRequest request;
  request.set_reason(reason);
  ShutdownResponse response;
  return FromGrpcStatus(stub_->Shutdown(&context, request, &response),
                        Peer("Shutdown"));
}

absl::Status RemoteWorker::SaveReplica(const SaveShardsRequest& request,
                                       SaveShardsResponse* response) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout_s_);
  return FromGrpcStatus(stub_->SaveReplica(&context, request, response),
                        Peer("SaveReplica"));
}

absl::Status RemoteWorker::RestoreReplica(const RestoreReplicaRequest& request,
                                          RestoreShardsResponse* response) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout_s_);
  return FromGrpcStatus(stub_->RestoreReplica(&context, request, response),
                        Peer("RestoreReplica"));
}

void RemoteWorker::Interrupt(const std::string& reason) {
  grpc::ClientContext context;
  SetDeadline(&context, kShortCallDeadlineS);
  InterruptRequest request;
  request.set_reason(reason);
  InterruptResponse response;
  // A worker that does not answer has no all-reduce to wait in.
  absl::Status s = FromGrpcStatus(
      stub_->Interrupt(&context, request, &response), Peer("Interrupt"));
  if (!s.ok()) VLOG(1) << s;
}

absl::Status RemoteWorker::RunStep(const StepRequest& request,
                                   StepResponse* response) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout_s_);
  return FromGrpcStatus(stub_->RunStep(&context, request, response),
                        Peer("RunStep"));
}

absl::Status RemoteWorker::RunSteps(
    const StepsRequest& request,
    const std::function<void(int, StepResponse)>& done) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout_s_ * static_cast<double>(
                                         std::max(1, request.steps_size())));
  std::unique_ptr<grpc::ClientReader<StepResponse>> reader =
      stub_->RunSteps(&context, request);
  const int asked = request.steps_size();
  int finished = 0;
  bool too_many = false;
  StepResponse response;
  while (reader->Read(&response)) {
    if (finished == asked) {
      too_many = true;
      context.TryCancel();
      break;
    }
    done(finished++, std::move(response));
    response.Clear();
  }
  // Worded as a RunStep call's error, so both read alike in the logs.
  absl::Status s = FromGrpcStatus(reader->Finish(), Peer("RunStep"));
  if (too_many || (s.ok() && finished != asked)) {
    return absl::InternalError(absl::StrCat(Peer("RunSteps"), ": answered ",
                                            too_many ? "more than " : "",
                                            finished, " of ", asked, " steps"));
  }
  return s;
}

WorkerHealth RemoteWorker::Probe() {
  HealthResponse response;
  if (!Health(&response, kHealthCheckTimeoutS).ok()) return WorkerHealth::kDown;
  absl::MutexLock lock(&mu_);
  // A worker never configured has nothing to lose.
  return configured_ && !response.configured() ? WorkerHealth::kLostState
                                               : WorkerHealth::kReady;
}

absl::Status RemoteWorker::Restore() {
  WorkerConfig config;
  {
    absl::MutexLock lock(&mu_);
    config = config_;
  }
  ConfigureResponse response;
  return Configure(config, &response);
}

}  // namespace tessera
