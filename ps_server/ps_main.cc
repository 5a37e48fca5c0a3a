// tessera_ps: a parameter server. It serves the shards the coordinator
// creates on it until the coordinator (or a signal) tells it to stop.

#include <memory>
#include <string>

#include "common/data_plane/socket.h"
#include "common/process/process_start.h"
#include "common/process/security_flags.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/server_shutdown_grace.h"
#include "common/shutdown_signal.h"
#include "glog/logging.h"
#include "ps_server/data_plane/dense_plane_server.h"
#include "ps_server/ps_service.h"
#include "ps_server/shard_store.h"

int main(int argc, char** argv) {
  tessera::ProcessStart start = tessera::StartProcess(
      &argc, &argv,
      "tessera_ps: parameter server. The cluster comes from TF_CONFIG, "
      "--tf_config, --ps_hosts/--worker_hosts/--chief_host with "
      "--task_type=ps --task_index=N, or (under srun) --slurm_jobs.",
      "ps");
  if (!start.cluster) return start.exit_code;
  const tessera::ClusterSpec& cluster = *start.cluster;

  // Every call to this server must carry the job's token.
  absl::StatusOr<tessera::RpcAuth> auth = tessera::RpcAuthFromFlags();
  if (!auth.ok()) {
    LOG(ERROR) << auth.status().message();
    return 2;
  }

  tessera::ShardStore store;
  tessera::PsServiceOptions options;
  options.auth = *std::move(auth);
  options.task_index = cluster.task().index;
  options.chunk_bytes = FLAGS_chunk_bytes;
  tessera::PsCore core(&store);
  tessera::ParameterServerService service(&core, options);

  const std::string address = cluster.own_address();
  // Tensor bytes may also travel on a TCP data plane, on a port of the
  // kernel's choosing that Health announces; workers use it with
  // --data_plane=tcp. With --tls_* it runs TLS with the same files and
  // trust as the gRPC server.
  std::string host;
  int port = 0;
  tessera::DensePlaneServerOptions plane_options;
  if (tessera::SplitHostPort(
          tessera::ListenAddress(address, start.server.listen_host), &host,
          &port)
          .ok()) {
    plane_options.host = host;
  }
  plane_options.job_token = options.auth.token();
  plane_options.timeout_s = FLAGS_rpc_timeout_s;
  plane_options.tls = start.server.tls;
  absl::StatusOr<std::unique_ptr<tessera::DensePlaneServer>> data_plane =
      tessera::DensePlaneServer::Start(&core, plane_options);
  if (!data_plane.ok()) {
    LOG(ERROR) << data_plane.status().message();
    return 1;
  }
  std::unique_ptr<grpc::Server> server =
      tessera::StartServer(address, &service, start.server);
  if (server == nullptr) return 1;
  LOG(INFO) << "ps " << options.task_index << " serving at " << address
            << ", data plane on port " << (*data_plane)->port()
            << (start.server.tls.has_value() ? " (TLS)" : "");
  const std::string why =
      tessera::WaitForShutdown(&service.shutdown_requested(), "request");
  LOG(INFO) << "ps " << options.task_index << " stopping (" << why << ")";
  tessera::ShutdownServer(server.get(), tessera::kServerShutdownGrace);
  data_plane->reset();
  return 0;
}
