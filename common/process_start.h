#ifndef TESSERA_COMMON_PROCESS_START_H_
#define TESSERA_COMMON_PROCESS_START_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "common/cluster_spec.h"
#include "gflags/gflags.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/config.h"

namespace grpc {
class Service;
}

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
};
ProcessStart StartProcess(int* argc, char*** argv, const char* usage,
                          absl::string_view task_type);

// Starts a gRPC server for `service` at ListenAddress(address,
// --listen_host) with the
// project's message limits, over TLS that requires a client certificate
// when --tls_cert/--tls_key/--tls_ca are set (common/tls_credentials.h),
// else plaintext; nullptr (the reason logged) when it cannot listen there
// or the TLS files cannot be read.
// `more` (optional) adds further services to the same server before it
// starts, e.g. the worker's all-reduce service. `selected_port` (optional)
// receives the port bound, which differs from the address's for port 0.
// The services check the job token themselves (common/rpc_auth.h).
std::unique_ptr<grpc::Server> StartServer(
    const std::string& address, grpc::Service* service,
    const std::function<void(grpc::ServerBuilder*)>& more = nullptr,
    int* selected_port = nullptr);

}  // namespace tessera

#endif  // TESSERA_COMMON_PROCESS_START_H_
