#ifndef TESSERA_COORDINATOR_JOB_CLUSTER_H_
#define TESSERA_COORDINATOR_JOB_CLUSTER_H_

#include <memory>
#include <vector>

#include "common/cluster/cluster_spec.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/transport_limits.h"
#include "coordinator/worker_task.h"
#include "ps_server/client/ps_client.h"

namespace tessera {

// The parameter servers and workers of a job as the coordinator reaches
// them, in task order.
struct JobCluster {
  std::vector<std::unique_ptr<PsClient>> ps;
  std::vector<std::unique_ptr<WorkerTask>> workers;
};

struct ConnectOptions {
  double timeout_s = kDefaultRpcTimeoutS;    // of every call
  int64_t chunk_bytes = kDefaultChunkBytes;  // largest chunk sent
  ChannelSecurity security;                  // the job's token and TLS
};

// gRPC clients of every parameter server and worker of `cluster`.
JobCluster ConnectCluster(const ClusterSpec& cluster,
                          const ConnectOptions& options = {});

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_JOB_CLUSTER_H_
