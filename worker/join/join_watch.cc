#include "worker/join/join_watch.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/short_call_deadline.h"
#include "grpcpp/client_context.h"
#include "proto/coordinator_service.grpc.pb.h"

namespace tessera {

JoinWatch::JoinWatch(JoinOptions options, absl::Duration interval,
                     std::function<void(const std::string& why)> gone)
    : options_(std::move(options)),
      interval_(interval),
      gone_(std::move(gone)),
      thread_([this] { Loop(); }) {}

JoinWatch::~JoinWatch() {
  stop_.Notify();
  thread_.join();
}

void JoinWatch::Loop() {
  std::unique_ptr<Coordinator::Stub> stub =
      Coordinator::NewStub(MakeChannel(options_.chief, options_.security));
  absl::Time answered = absl::Now();
  while (!stop_.WaitForNotificationWithTimeout(interval_)) {
    grpc::ClientContext context;
    SetDeadline(&context, kShortCallDeadlineS);
    JobStatus status;
    const absl::Status s = FromGrpcStatus(
        stub->GetJobStatus(&context, JobStatusRequest(), &status),
        options_.chief);
    if (!s.ok()) {
      if (absl::Now() - answered < options_.timeout) continue;
      gone_(absl::StrCat("the job's coordinator has not answered for ",
                         absl::FormatDuration(absl::Now() - answered), " (",
                         s.message(), ")"));
      return;
    }
    answered = absl::Now();
    const WorkerState* me = nullptr;
    for (const WorkerState& w : status.workers()) {
      if (w.address() == options_.address) me = &w;
    }
    if (me == nullptr) {
      gone_(absl::StrCat("the job's coordinator at ", options_.chief,
                         " does not count this worker (it restarted from "
                         "its cluster spec, which lists only the workers it "
                         "started with)"));
      return;
    }
    if (me->state() == "drained" || me->state() == "removed") {
      gone_(absl::StrCat("the job counts this worker as ", me->state()));
      return;
    }
  }
}

}  // namespace tessera
