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
      rpc_(Worker::NewStub(std::move(channel))) {}

std::string RemoteWorker::Peer(const char* call) const {
  return absl::StrCat("worker ", task_index_, " (", address_, ") ", call);
}

template <typename Request, typename Response>
absl::Status RemoteWorker::Call(
    grpc::Status (Worker::Stub::*method)(grpc::ClientContext*, const Request&,
                                         Response*),
    const char* name, const Request& request, Response* response,
    double timeout_s) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout_s);
  return FromGrpcStatus((rpc_.get()->*method)(&context, request, response),
                        Peer(name));
}

absl::Status RemoteWorker::Configure(const WorkerConfig& config,
                                     ConfigureResponse* response) {
  absl::Status status =
      Call(&Worker::Stub::Configure, "Configure", config, response, timeout_s_);
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    config_ = config;
    configured_ = true;
  }
  return status;
}

absl::Status RemoteWorker::Evaluate(const EvaluateRequest& request,
                                    EvaluateResponse* response) {
  return Call(&Worker::Stub::Evaluate, "Evaluate", request, response,
              timeout_s_);
}

absl::Status RemoteWorker::Health(HealthResponse* response, double timeout_s) {
  return Call(&Worker::Stub::Health, "Health", HealthRequest(), response,
              timeout_s);
}

absl::Status RemoteWorker::Shutdown(const std::string& reason) {
  ShutdownRequest request;
  request.set_reason(reason);
  ShutdownResponse response;
  return Call(&Worker::Stub::Shutdown, "Shutdown", request, &response,
              kShortCallDeadlineS);
}

absl::Status RemoteWorker::SaveReplica(const SaveShardsRequest& request,
                                       SaveShardsResponse* response) {
  return Call(&Worker::Stub::SaveReplica, "SaveReplica", request, response,
              timeout_s_);
}

absl::Status RemoteWorker::RestoreReplica(const RestoreReplicaRequest& request,
                                          RestoreShardsResponse* response) {
  return Call(&Worker::Stub::RestoreReplica, "RestoreReplica", request,
              response, timeout_s_);
}

void RemoteWorker::Interrupt(const std::string& reason) {
  InterruptRequest request;
  request.set_reason(reason);
  InterruptResponse response;
  // A worker that does not answer has no all-reduce to wait in.
  absl::Status s = Call(&Worker::Stub::Interrupt, "Interrupt", request,
                        &response, kShortCallDeadlineS);
  if (!s.ok()) VLOG(1) << s;
}

absl::Status RemoteWorker::RunStep(const StepRequest& request,
                                   StepResponse* response) {
  return Call(&Worker::Stub::RunStep, "RunStep", request, response, timeout_s_);
}

absl::Status RemoteWorker::RunSteps(
    const StepsRequest& request,
    const std::function<void(int, StepResponse)>& done) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout_s_ * static_cast<double>(
                                         std::max(1, request.steps_size())));
  std::unique_ptr<grpc::ClientReader<StepResponse>> reader =
      rpc_->RunSteps(&context, request);
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
