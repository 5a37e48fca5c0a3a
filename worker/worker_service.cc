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

namespace {

// Runs a RunSteps call's steps in order on the service's executor, and
// writes each step's response before starting the next, so the
// coordinator has it even if this process dies during a later step. The
// executor's thread blocks on each write (it may; gRPC's threads may not).
class StepsWriter final : public grpc::ServerWriteReactor<StepResponse> {
 public:
  StepsWriter(TrainingWorker* worker, const StepsRequest* request,
              SerialExecutor* executor)
      : worker_(worker), request_(request) {
    executor->Post([this] { Run(); });
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    write_ok_ = ok;
    writing_ = false;
  }
  void OnDone() override { delete this; }

 private:
  void Run() {
    for (const StepRequest& step : request_->steps()) {
      response_.Clear();
      absl::Status status = worker_->RunStep(step, &response_);
      if (!status.ok()) {
        LOG(WARNING) << "step " << step.step() << " failed: " << status;
        Finish(ToGrpcStatus(status));  // may delete this
        return;
      }
      {
        absl::MutexLock lock(&mu_);
        writing_ = true;
      }
      StartWrite(&response_);
      if (!WriteSucceeded()) {
        // The coordinator is gone or gave up on the call: the steps not
        // run yet are its to schedule again.
        Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                            "the caller went away; the later steps did not "
                            "run"));
        return;
      }
    }
    Finish(grpc::Status::OK);
  }

  // Waits for the write in flight to end; whether it reached the stream.
  bool WriteSucceeded() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](bool* writing) { return !*writing; }, &writing_));
    return write_ok_;
  }

  TrainingWorker* const worker_;
  const StepsRequest* const request_;
  StepResponse response_;
  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_ok_ ABSL_GUARDED_BY(mu_) = true;
};

}  // namespace

grpc::ServerWriteReactor<StepResponse>* WorkerService::RunSteps(
    grpc::CallbackServerContext* context, const StepsRequest* request) {
  if (grpc::Status s = auth_.Check(*context, "Worker.RunSteps"); !s.ok()) {
    // A reactor that refuses at once.
    class Refused final : public grpc::ServerWriteReactor<StepResponse> {
     public:
      explicit Refused(grpc::Status s) { Finish(std::move(s)); }
      void OnDone() override { delete this; }
    };
    return new Refused(std::move(s));
  }
  return new StepsWriter(worker_, request, &executor_);
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
