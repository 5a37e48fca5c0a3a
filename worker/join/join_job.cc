#include "worker/join/join_job.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/rpc/backoff.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/short_call_deadline.h"
#include "glog/logging.h"
#include "grpcpp/client_context.h"
#include "proto/coordinator_service.grpc.pb.h"

namespace tessera {

absl::StatusOr<ClusterSpec> JoinRunningJob(const JoinOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError(
        "--join needs --join_address=HOST:PORT: where this worker serves, "
        "as the chief and the parameter servers reach it");
  }
  std::unique_ptr<Coordinator::Stub> stub =
      Coordinator::NewStub(MakeChannel(options.chief, options.security));
  AddWorkerRequest request;
  request.set_address(options.address);
  AddWorkerResponse response;
  bool told = false;
  absl::Status s = RetryTransientUntil(absl::Now() + options.timeout, [&] {
    grpc::ClientContext context;
    SetDeadline(&context, kShortCallDeadlineS);
    response.Clear();
    absl::Status attempt = FromGrpcStatus(
        stub->AddWorker(&context, request, &response), options.chief);
    if (IsTransient(attempt) && !told) {
      told = true;
      LOG(INFO) << "joining the job at " << options.chief << ": " << attempt
                << "; asking again for up to "
                << absl::FormatDuration(options.timeout);
    }
    return attempt;
  });
  if (!s.ok()) {
    return absl::Status(
        s.code(),
        absl::StrCat("joining the job at ", options.chief, ": ", s.message()));
  }
  absl::StatusOr<ClusterSpec> cluster =
      ClusterSpec::FromTfConfigJson(response.tf_config());
  if (!cluster.ok()) {
    return absl::InternalError(
        absl::StrCat("the chief at ", options.chief,
                     " answered with a cluster that does not parse: ",
                     cluster.status().message()));
  }
  LOG(INFO) << "joined the job at " << options.chief << " as worker "
            << response.worker_index();
  return cluster;
}

}  // namespace tessera
