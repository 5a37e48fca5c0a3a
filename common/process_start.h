#ifndef TESSERA_COMMON_PROCESS_START_H_
#define TESSERA_COMMON_PROCESS_START_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "common/cluster_spec.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/config.h"

namespace grpc {
class Service;
}

namespace tessera {

// What every Tessera binary does first: parse flags, log to stderr, turn
// SIGINT/SIGTERM into an orderly shutdown, resolve the cluster, honour
// --print_cluster, and check that this task is of `task_type` and that
// --chunk_bytes is sane. `cluster` is set when the process should go on;
// otherwise it should exit with `exit_code` (0 after --print_cluster, 2
// for a bad command line or cluster, the reason already logged).
struct ProcessStart {
  std::optional<ClusterSpec> cluster;
  int exit_code = 0;
};
ProcessStart StartProcess(int* argc, char*** argv, const char* usage,
                          absl::string_view task_type);

// Starts a gRPC server for `service` at ListenAddress(address) with the
// project's message limits; nullptr (the reason logged) when it cannot
// listen there.
// `more` (optional) adds further services to the same server before it
// starts, e.g. the worker's all-reduce service.
std::unique_ptr<grpc::Server> StartServer(
    const std::string& address, grpc::Service* service,
    const std::function<void(grpc::ServerBuilder*)>& more = nullptr);

}  // namespace tessera

#endif  // TESSERA_COMMON_PROCESS_START_H_
