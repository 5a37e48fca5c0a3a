#include "common/process/process_start.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/command_line.h"
#include "common/exit_code.h"
#include "common/process/cluster_flags.h"
#include "common/process/fault_point.h"
#include "common/process/security_flags.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/transport_limits.h"
#include "common/shutdown_signal.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DEFINE_double(rpc_timeout_s, tessera::kDefaultRpcTimeoutS,
              "Deadline of every remote call, in seconds (streams of large "
              "tensors included).");

DEFINE_int64(chunk_bytes, tessera::kDefaultChunkBytes,
             "Largest piece of a tensor sent in one message, in bytes "
             "(4096 to 4 MiB).");

DEFINE_string(listen_host, "[::]",
              "Interface servers listen on; \"cluster\" means the host this "
              "task has in the cluster spec.");

namespace tessera {

ProcessStart StartProcess(int* argc, char*** argv, const char* usage,
                          absl::string_view task_type,
                          const ClusterSource& cluster_source) {
  gflags::SetUsageMessage(usage);
  ParseCommandLineOrExit(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging((*argv)[0]);
  InstallShutdownSignals();
  // Debian's Abseil checks every lock order for cycles (a debugging aid
  // that costs each step's many locks a graph lookup); the tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  ProcessStart start;
  start.exit_code = 2;
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
  absl::StatusOr<ChannelSecurity> security = ChannelSecurityFromFlags();
  if (!security.ok()) {
    LOG(ERROR) << security.status().message();
    return start;
  }
  absl::StatusOr<ClusterSpec> cluster =
      cluster_source ? cluster_source(*security) : ResolveClusterSpec();
  if (!cluster.ok()) {
    LOG(ERROR) << cluster.status().message();
    // From a source: a chief that refused (2) or never answered (1).
    if (cluster_source) start.exit_code = ExitCodeFor(cluster.status());
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
  // Tests only: a process dies or stops at a named point (fault_point.h).
  if (const char* folder = std::getenv("TESSERA_FAULT_POINTS")) {
    EnableFaultPoints(
        folder, absl::StrCat(cluster->task().type, "-", cluster->task().index));
  }
  start.server.listen_host = FLAGS_listen_host;
  start.server.tls = security->tls;
  start.security = *std::move(security);
  start.cluster = *std::move(cluster);
  return start;
}

}  // namespace tessera
