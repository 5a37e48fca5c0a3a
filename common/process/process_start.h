#ifndef TESSERA_COMMON_PROCESS_START_H_
#define TESSERA_COMMON_PROCESS_START_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "common/cluster/cluster_spec.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/grpc_server.h"
#include "gflags/gflags.h"

// The RPC flags every binary shares. Only mains (through this file's
// functions) read them; libraries take the values as options.
DECLARE_double(rpc_timeout_s);
DECLARE_int64(chunk_bytes);
DECLARE_string(listen_host);

namespace tessera {

// What every Tessera binary does first: parse flags, log to stderr, turn
// SIGINT/SIGTERM into an orderly shutdown, resolve the cluster, honour
// --print_cluster, and check that this task is of `task_type`, that
// --chunk_bytes and --rpc_timeout_s are sane, and that the job token and the
// TLS files the flags name can be read (so no channel or server fails on them
// later). `cluster` is set when the process should go on; otherwise it should
// exit with `exit_code` (0 after --print_cluster, 2 for a bad command line or
// cluster, the reason already logged).
struct ProcessStart {
  std::optional<ClusterSpec> cluster;
  int exit_code = 0;
  // From the flags, checked: how this process's channels show they belong
  // to the job, and how its server listens. Mains pass them down.
  ChannelSecurity security;
  ServerOptions server;
};
//
// `cluster_source`, when given, is asked for the cluster instead of the
// cluster flags, with the checked security: a worker that joins a running
// job asks its chief (worker_main.cc, --join).
using ClusterSource =
    std::function<absl::StatusOr<ClusterSpec>(const ChannelSecurity&)>;
ProcessStart StartProcess(int* argc, char*** argv, const char* usage,
                          absl::string_view task_type,
                          const ClusterSource& cluster_source = nullptr);

}  // namespace tessera

#endif  // TESSERA_COMMON_PROCESS_START_H_
