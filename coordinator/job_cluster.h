#ifndef TESSERA_COORDINATOR_JOB_CLUSTER_H_
#define TESSERA_COORDINATOR_JOB_CLUSTER_H_

#include <memory>
#include <vector>

#include "common/cluster_spec.h"
#include "coordinator/worker_task.h"
#include "ps_server/ps_client.h"

namespace tessera {

// The parameter servers and workers of a job as the coordinator reaches
// them, in task order.
struct JobCluster {
  std::vector<std::unique_ptr<PsClient>> ps;
  std::vector<std::unique_ptr<WorkerTask>> workers;
};

// gRPC clients of every parameter server and worker of `cluster`.
JobCluster ConnectCluster(const ClusterSpec& cluster);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_JOB_CLUSTER_H_
