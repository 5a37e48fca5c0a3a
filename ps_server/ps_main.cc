// tessera_ps: a parameter server. It serves the shards the coordinator
// creates on it until the coordinator (or a signal) tells it to stop.

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/data_plane/descriptor_limit.h"
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

DEFINE_string(data_plane_server, "events",
              "how the TCP data plane serves its connections: events (a "
              "fixed pool of threads over epoll, any number of connections) "
              "or threads (a thread per connection, the plane before #46)");
DEFINE_int32(data_plane_threads, 0,
             "the events data plane's pool of threads; 0: one per core");

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

  tessera::DataPlaneServing serving;
  if (FLAGS_data_plane_server == "events") {
    serving = tessera::DataPlaneServing::kEventPool;
  } else if (FLAGS_data_plane_server == "threads") {
    serving = tessera::DataPlaneServing::kThreadPerConnection;
  } else {
    LOG(ERROR) << "--data_plane_server: \"" << FLAGS_data_plane_server
               << "\" is not one of events, threads";
    return 2;
  }
  if (FLAGS_data_plane_threads < 0) {
    LOG(ERROR) << "--data_plane_threads must be >= 0, got "
               << FLAGS_data_plane_threads;
    return 2;
  }
  // Every data plane connection holds a descriptor: take all the hard
  // limit allows, and say how many that is.
  absl::StatusOr<tessera::DescriptorLimit> limit =
      tessera::RaiseDescriptorLimit();
  if (limit.ok()) {
    LOG(INFO) << "ps: " << tessera::DescribeDescriptorLimit(*limit);
  } else {
    LOG(WARNING) << "ps: " << limit.status().message();
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
  plane_options.serving = serving;
  plane_options.threads = FLAGS_data_plane_threads;
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
            << ", data plane on port " << (*data_plane)->port() << " ("
            << ((*data_plane)->pool_threads() > 0
                    ? absl::StrCat((*data_plane)->pool_threads(),
                                   " pool threads")
                    : std::string("a thread per connection"))
            << ")" << (start.server.tls.has_value() ? " (TLS)" : "");
  const std::string why =
      tessera::WaitForShutdown(&service.shutdown_requested(), "request");
  LOG(INFO) << "ps " << options.task_index << " stopping (" << why << ")";
  tessera::ShutdownServer(server.get(), tessera::kServerShutdownGrace);
  data_plane->reset();
  return 0;
}
