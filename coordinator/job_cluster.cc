#include "coordinator/job_cluster.h"

#include <string>

#include "common/rpc/grpc_channel.h"
#include "coordinator/remote_worker.h"

namespace tessera {

JobCluster ConnectCluster(const ClusterSpec& cluster,
                          const ConnectOptions& options) {
  JobCluster out;
  PsClientOptions ps_options;
  ps_options.timeout_s = options.timeout_s;
  ps_options.chunk_bytes = options.chunk_bytes;
  const std::vector<std::string>& ps = cluster.tasks("ps");
  for (size_t k = 0; k < ps.size(); ++k) {
    out.ps.push_back(std::make_unique<PsClient>(
        ps[k], static_cast<int>(k), MakeChannel(ps[k], options.security),
        ps_options));
  }
  const std::vector<std::string>& workers = cluster.tasks("worker");
  for (size_t w = 0; w < workers.size(); ++w) {
    out.workers.push_back(std::make_unique<RemoteWorker>(
        workers[w], static_cast<int>(w),
        MakeChannel(workers[w], options.security), options.timeout_s));
  }
  return out;
}

}  // namespace tessera
