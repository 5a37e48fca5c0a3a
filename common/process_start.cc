#include "common/process_start.h"

#include "common/cluster_flags.h"
#include "common/command_line.h"
#include "common/grpc_channel.h"
#include "common/shutdown_signal.h"
#include "common/tls_credentials.h"
#include "common/transport_limits.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace tessera {

ProcessStart StartProcess(int* argc, char*** argv, const char* usage,
                          absl::string_view task_type) {
  gflags::SetUsageMessage(usage);
  ParseCommandLineOrExit(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging((*argv)[0]);
  InstallShutdownSignals();

  ProcessStart start;
  start.exit_code = 2;
  absl::StatusOr<ClusterSpec> cluster = ResolveClusterSpec();
  if (!cluster.ok()) {
    LOG(ERROR) << cluster.status().message();
    return start;
  }
  if (PrintClusterIfRequested(*cluster)) {
    start.exit_code = 0;
    return start;
  }
  if (cluster->task().type != task_type) {
    LOG(ERROR) << (*argv)[0] << " needs a task of type " << task_type
               << ", the cluster says " << cluster->task().type;
    return start;
  }
  if (FLAGS_chunk_bytes < 4096 || FLAGS_chunk_bytes > kMaxChunkBytes) {
    LOG(ERROR) << "--chunk_bytes must be in [4096, " << kMaxChunkBytes
               << "], got " << FLAGS_chunk_bytes;
    return start;
  }
  if (absl::Status s =
          CheckTimeoutSeconds("--rpc_timeout_s", FLAGS_rpc_timeout_s);
      !s.ok()) {
    LOG(ERROR) << s.message();
    return start;
  }
  if (absl::StatusOr<ChannelSecurity> security = ChannelSecurityFromFlags();
      !security.ok()) {
    LOG(ERROR) << security.status().message();
    return start;
  }
  start.cluster = *std::move(cluster);
  return start;
}

std::unique_ptr<grpc::Server> StartServer(
    const std::string& address, grpc::Service* service,
    const std::function<void(grpc::ServerBuilder*)>& more, int* selected_port) {
  // By default every interface at the cluster's port: the host name in
  // the cluster spec is how others reach us, not necessarily a local
  // address (see --listen_host).
  const std::string listen = ListenAddress(address);
  absl::StatusOr<std::optional<TlsFiles>> tls = LoadTlsFiles();
  if (!tls.ok()) {
    LOG(ERROR) << "cannot serve at " << listen << ": "
               << tls.status().message();
    return nullptr;
  }
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  int bound_port = 0;
  builder.AddListeningPort(listen, MakeServerCredentials(*tls), &bound_port);
  builder.RegisterService(service);
  if (more) more(&builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    LOG(ERROR) << "cannot listen on " << listen
               << (tls->has_value() ? " with TLS" : "")
               << " (in use, not a valid address, or a certificate and key "
                  "that do not match)";
    return nullptr;
  }
  LOG(INFO) << "serving at " << listen << " on port " << bound_port
            << (tls->has_value() ? " over TLS, client certificates required"
                                 : " in plaintext");
  if (selected_port != nullptr) *selected_port = bound_port;
  return server;
}

}  // namespace tessera
