#ifndef TESSERA_COMMON_GRPC_SERVER_H_
#define TESSERA_COMMON_GRPC_SERVER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/rpc/tls_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace grpc {
class Service;
}

namespace tessera {

// How a server listens (the binaries fill it from --listen_host and the
// --tls_* flags in StartProcess, common/process/process_start.h).
struct ServerOptions {
  // "[::]" every interface, "cluster" the task's own host, else the host
  // given (ListenAddress(), common/rpc/grpc_channel.h).
  std::string listen_host = "[::]";
  // TLS that requires a client certificate signed by the job's CA;
  // nullopt: plaintext.
  std::optional<TlsFiles> tls;
};

// Starts a gRPC server for `service` at ListenAddress(address,
// options.listen_host) with the project's message limits; nullptr (the
// reason logged: the port in use, an address not of this machine) when it
// cannot listen there. `more` (optional) adds further services to the
// same server before it starts, e.g. the worker's all-reduce service.
// `selected_port` (optional) receives the port bound, which differs from
// the address's for port 0. The services check the job token themselves
// (common/rpc/rpc_auth.h).
std::unique_ptr<grpc::Server> StartServer(
    const std::string& address, grpc::Service* service,
    const ServerOptions& options,
    const std::function<void(grpc::ServerBuilder*)>& more = nullptr,
    int* selected_port = nullptr);

}  // namespace tessera

#endif  // TESSERA_COMMON_GRPC_SERVER_H_
