#ifndef TESSERA_WORKER_JOIN_JOIN_JOB_H_
#define TESSERA_WORKER_JOIN_JOIN_JOB_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_spec.h"
#include "common/rpc/grpc_channel.h"

namespace tessera {

struct JoinOptions {
  std::string chief;         // the coordinator's HOST:PORT
  std::string address;       // where this worker will serve, HOST:PORT
  ChannelSecurity security;  // the job's token (and TLS)
  // How long to keep asking while the chief does not answer or the job is
  // still starting.
  absl::Duration timeout = absl::Minutes(5);
};

// Asks the chief of a running job to take this worker (Coordinator.
// AddWorker) and returns the cluster it is part of: every task of the job,
// this worker last, as task worker:index. The chief then configures it
// once it serves at `address`. UNAVAILABLE answers (a chief that is not up
// or a job still starting) are asked again until `timeout`; any other is
// the answer, e.g. FailedPrecondition for a mirrored job.
absl::StatusOr<ClusterSpec> JoinRunningJob(const JoinOptions& options);

}  // namespace tessera

#endif  // TESSERA_WORKER_JOIN_JOIN_JOB_H_
