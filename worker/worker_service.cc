#include "worker/worker_service.h"

#include <utility>

#include "common/grpc_status.h"
#include "glog/logging.h"

namespace tessera {

WorkerService::WorkerService(TrainingWorker* worker, int task_index,
                             RpcAuth auth)
    : worker_(worker), task_index_(task_index), auth_(std::move(auth)) {}

grpc::ServerUnaryReactor* WorkerService::Configure(
    grpc::CallbackServerContext* context, const WorkerConfig* request,
    ConfigureResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status s = auth_.Check(*context, "Worker.Configure"); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  executor_.Post([this, request, response, reactor] {
    absl::Status status = worker_->Configure(*request, response);
    if (!status.ok()) LOG(WARNING) << "Configure refused: " << status;
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::RunStep(
    grpc::CallbackServerContext* context, const StepRequest* request,
    StepResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status s = auth_.Check(*context, "Worker.RunStep"); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  executor_.Post([this, request, response, reactor] {
    absl::Status status = worker_->RunStep(*request, response);
    if (!status.ok()) {
      LOG(WARNING) << "step " << request->step() << " failed: " << status;
    }
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::Evaluate(
    grpc::CallbackServerContext* context, const EvaluateRequest* request,
    EvaluateResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status s = auth_.Check(*context, "Worker.Evaluate"); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  executor_.Post([this, request, response, reactor] {
    reactor->Finish(ToGrpcStatus(worker_->Evaluate(*request, response)));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::Health(
    grpc::CallbackServerContext* context, const HealthRequest* request,
    HealthResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status s = auth_.Check(*context, "Worker.Health"); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  response->set_task_type("worker");
  response->set_task_index(task_index_);
  response->set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - start_));
  response->set_configured(worker_->configured());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::Shutdown(
    grpc::CallbackServerContext* context, const ShutdownRequest* request,
    ShutdownResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status s = auth_.Check(*context, "Worker.Shutdown"); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  LOG(INFO) << "Shutdown requested: " << request->reason();
  if (!shutdown_called_.exchange(true)) shutdown_.Notify();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace tessera
