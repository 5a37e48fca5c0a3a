#include "coordinator/control/coordinator_service.h"

#include <string>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"

namespace tessera {
namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context,
                               const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

absl::Duration TimeoutOf(double seconds) {
  return seconds > 0 ? absl::Seconds(seconds) : absl::Hours(1);
}

}  // namespace

grpc::ServerUnaryReactor* CoordinatorService::GetJobStatus(
    grpc::CallbackServerContext* context, const JobStatusRequest*,
    JobStatus* response) {
  if (grpc::Status s = auth_.Check(*context, "Coordinator.GetJobStatus");
      !s.ok()) {
    return Done(context, s);
  }
  *response = status_();
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* CoordinatorService::Health(
    grpc::CallbackServerContext* context, const HealthRequest*,
    HealthResponse* response) {
  if (grpc::Status s = auth_.Check(*context, "Coordinator.Health"); !s.ok()) {
    return Done(context, s);
  }
  response->set_task_type("chief");
  response->set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - start_));
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* CoordinatorService::ScheduleSteps(
    grpc::CallbackServerContext* context, const ScheduleStepsRequest* request,
    ScheduleStepsResponse* response) {
  if (grpc::Status s = auth_.Check(*context, "Coordinator.ScheduleSteps");
      !s.ok()) {
    return Done(context, s);
  }
  if (request->steps() <= 0 || request->steps() > (int64_t{1} << 40)) {
    return Done(context,
                grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                             absl::StrCat("ScheduleSteps: steps must be in "
                                          "[1, 2^40], not ",
                                          request->steps())));
  }
  if (control_->stop_requested()) {
    return Done(context, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                      "ScheduleSteps: the job is stopping"));
  }
  response->set_extra_steps_requested(control_->AddSteps(request->steps()));
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* CoordinatorService::Join(
    grpc::CallbackServerContext* context, const JoinRequest* request,
    JobStatus* response) {
  if (grpc::Status s = auth_.Check(*context, "Coordinator.Join"); !s.ok()) {
    return Done(context, s);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Duration timeout = TimeoutOf(request->timeout_s());
  std::thread([this, reactor, response, timeout] {
    absl::Status s = control_->Join(timeout);
    *response = status_();
    reactor->Finish(ToGrpcStatus(s));
  }).detach();
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::Checkpoint(
    grpc::CallbackServerContext* context, const CheckpointRequest* request,
    CheckpointResponse* response) {
  if (grpc::Status s = auth_.Check(*context, "Coordinator.Checkpoint");
      !s.ok()) {
    return Done(context, s);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Duration timeout = TimeoutOf(request->timeout_s());
  std::thread([this, reactor, response, timeout] {
    absl::StatusOr<std::string> path = control_->Checkpoint(timeout);
    if (path.ok()) response->set_path(*path);
    reactor->Finish(ToGrpcStatus(path.status()));
  }).detach();
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::Stop(
    grpc::CallbackServerContext* context, const StopRequest* request,
    StopResponse*) {
  if (grpc::Status s = auth_.Check(*context, "Coordinator.Stop"); !s.ok()) {
    return Done(context, s);
  }
  // The reason reaches the terminal and the log: escape control bytes (a
  // reason carrying terminal escape codes must not drive the operator's
  // terminal) and keep it short.
  constexpr size_t kMaxReason = 200;
  std::string reason = absl::CHexEscape(
      absl::string_view(request->reason()).substr(0, kMaxReason));
  if (request->reason().size() > kMaxReason) absl::StrAppend(&reason, "...");
  LOG(INFO) << "stop requested: "
            << (reason.empty() ? "no reason given" : reason);
  stop_(reason);
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* CoordinatorService::AddWorker(
    grpc::CallbackServerContext* context, const AddWorkerRequest* request,
    AddWorkerResponse* response) {
  if (grpc::Status s = auth_.Check(*context, "Coordinator.AddWorker");
      !s.ok()) {
    return Done(context, s);
  }
  if (elastic_ == nullptr) {
    return Done(context, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                      "AddWorker: this coordinator takes no "
                                      "new workers"));
  }
  absl::StatusOr<AddWorkerResponse> added =
      elastic_->AddWorker(request->address());
  if (added.ok()) *response = *std::move(added);
  return Done(context, ToGrpcStatus(added.status()));
}

grpc::ServerUnaryReactor* CoordinatorService::DrainWorker(
    grpc::CallbackServerContext* context, const DrainWorkerRequest* request,
    DrainWorkerResponse* response) {
  if (grpc::Status s = auth_.Check(*context, "Coordinator.DrainWorker");
      !s.ok()) {
    return Done(context, s);
  }
  if (elastic_ == nullptr) {
    return Done(context, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                      "DrainWorker: this coordinator drains "
                                      "no workers"));
  }
  absl::StatusOr<int> drained = elastic_->DrainWorker(request->worker());
  if (drained.ok()) response->set_worker_index(*drained);
  return Done(context, ToGrpcStatus(drained.status()));
}

}  // namespace tessera
