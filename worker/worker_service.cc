#include "worker/worker_service.h"

#include <deque>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/example_digest.h"
#include "common/process/fault_point.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"

namespace tessera {

WorkerService::WorkerService(TrainingWorker* worker, int task_index,
                             RpcAuth auth)
    : worker_(worker), task_index_(task_index), auth_(std::move(auth)) {}

grpc::ServerUnaryReactor* WorkerService::OnExecutor(
    grpc::CallbackServerContext* context, const char* method,
    std::function<absl::Status()> call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status s = auth_.Check(*context, absl::StrCat("Worker.", method));
      !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  executor_.Post([method, call = std::move(call), reactor] {
    absl::Status status = call();
    if (!status.ok()) LOG(WARNING) << method << " failed: " << status;
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::Configure(
    grpc::CallbackServerContext* context, const WorkerConfig* request,
    ConfigureResponse* response) {
  return OnExecutor(context, "Configure", [this, request, response] {
    // Tests: a worker lost while a chief configures it.
    FaultPoint("configure");
    return worker_->Configure(*request, response);
  });
}

grpc::ServerUnaryReactor* WorkerService::SaveReplica(
    grpc::CallbackServerContext* context, const SaveShardsRequest* request,
    SaveShardsResponse* response) {
  return OnExecutor(context, "SaveReplica", [this, request, response] {
    return worker_->SaveReplica(*request, response);
  });
}

grpc::ServerUnaryReactor* WorkerService::RestoreReplica(
    grpc::CallbackServerContext* context, const RestoreReplicaRequest* request,
    RestoreShardsResponse* response) {
  return OnExecutor(context, "RestoreReplica", [this, request, response] {
    return worker_->RestoreReplica(*request, response);
  });
}

grpc::ServerUnaryReactor* WorkerService::Interrupt(
    grpc::CallbackServerContext* context, const InterruptRequest* request,
    InterruptResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status s = auth_.Check(*context, "Worker.Interrupt"); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  worker_->Interrupt(request->reason());
  reactor->Finish(grpc::Status::OK);
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
    FaultPoint("step");  // tests: a worker lost inside a step
    absl::Status status = worker_->RunStep(*request, response);
    if (!status.ok()) {
      LOG(WARNING) << "step " << request->step() << " failed: " << status;
    } else {
      response->set_example_digest(DigestOfStep(*request));
    }
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

namespace {

// Runs a RunSteps call's steps in order on the service's executor and
// streams each step's response as soon as it finishes, so the coordinator
// has it even if this process dies during a later step. The next step
// starts without waiting for the write: responses queue while one is in
// flight (gRPC allows one at a time) and OnWriteDone sends the next.
class StepsWriter final : public grpc::ServerWriteReactor<StepResponse> {
 public:
  StepsWriter(TrainingWorker* worker, const StepsRequest* request,
              SerialExecutor* executor)
      : worker_(worker), request_(request) {
    executor->Post([this] { Run(); });
  }

  void OnWriteDone(bool ok) override {
    StepResponse* next = nullptr;
    bool finish = false;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {
        // The coordinator is gone or gave up on the call: the steps not
        // run yet are its to schedule again.
        broken_ = true;
        queued_.clear();
      }
      next = NextWriteLocked();
      finish = next == nullptr && FinishNowLocked(&status);
    }
    if (next != nullptr) StartWrite(next);
    if (finish) Finish(status);  // may delete this
  }
  void OnDone() override { delete this; }

 private:
  void Run() {
    grpc::Status result;
    for (const StepRequest& step : request_->steps()) {
      {
        absl::MutexLock lock(&mu_);
        if (broken_) {
          result = grpc::Status(grpc::StatusCode::CANCELLED,
                                "the caller went away; the later steps did "
                                "not run");
          break;
        }
      }
      StepResponse response;
      FaultPoint("step");
      absl::Status status = worker_->RunStep(step, &response);
      if (!status.ok()) {
        LOG(WARNING) << "step " << step.step() << " failed: " << status;
        result = ToGrpcStatus(status);
        break;
      }
      // What the step trained, by identity (common/example_digest.h).
      response.set_example_digest(DigestOfStep(step));
      StepResponse* next = nullptr;
      {
        absl::MutexLock lock(&mu_);
        queued_.push_back(std::move(response));
        next = NextWriteLocked();
      }
      if (next != nullptr) StartWrite(next);
    }
    bool finish = false;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      ran_all_ = true;
      result_ = result;
      finish = !writing_ && FinishNowLocked(&status);
    }
    if (finish) Finish(status);  // may delete this
  }

  // The response to write now, if none is in flight: moved to in_flight_,
  // which lives until its OnWriteDone.
  StepResponse* NextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || queued_.empty()) return nullptr;
    in_flight_ = std::move(queued_.front());
    queued_.pop_front();
    writing_ = true;
    return &in_flight_;
  }
  // Whether the call ends now (every step ran or failed, every response
  // written), and with which status; true at most once.
  bool FinishNowLocked(grpc::Status* status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!ran_all_ || writing_ || !queued_.empty() || finished_) return false;
    finished_ = true;
    *status =
        broken_ && result_.ok()
            ? grpc::Status(grpc::StatusCode::CANCELLED, "the caller went away")
            : result_;
    return true;
  }

  TrainingWorker* const worker_;
  const StepsRequest* const request_;
  absl::Mutex mu_;
  std::deque<StepResponse> queued_ ABSL_GUARDED_BY(mu_);
  StepResponse in_flight_;  // written by the thread that sets writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool ran_all_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status result_ ABSL_GUARDED_BY(mu_);
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
  // One line per epoch: where an operator (or the chaos test) sees that
  // evaluation, not training, is under way.
  LOG(INFO) << "evaluating test examples [" << request->begin() << ", "
            << request->end() << ")";
  executor_.Post([this, request, response, reactor] {
    FaultPoint("evaluate");  // tests: a worker lost while it evaluates
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
