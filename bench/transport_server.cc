#include "bench/transport_server.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_channel.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace tessera {
namespace bench {
namespace {

int PortAt(int base_port, int offset) {
  return base_port > 0 ? base_port + offset : 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TransportServer>> TransportServer::Start(
    const TransportServerOptions& options) {
  if (options.base_port < 0 || options.base_port > 65535 - 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "base port must be in [1, 65532] (or 0), got ", options.base_port));
  }
  std::unique_ptr<TransportServer> t(new TransportServer());
  t->endpoints_.host = options.host;
  PsServiceOptions service_options;
  service_options.chunk_bytes = options.chunk_bytes;
  t->service_ =
      std::make_unique<ParameterServerService>(&t->core_, service_options);
  t->floor_ = std::make_unique<GrpcFloorService>(options.max_bytes,
                                                 options.chunk_bytes);

  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  for (const auto& [name, value] : options.grpc_args) {
    builder.AddChannelArgument(name, value);
  }
  const std::string grpc_address =
      absl::StrCat(options.host, ":", PortAt(options.base_port, 0));
  builder.AddListeningPort(grpc_address, grpc::InsecureServerCredentials(),
                           &t->endpoints_.grpc_port);
  builder.RegisterService(t->service_.get());
  builder.RegisterCallbackGenericService(t->floor_.get());
  t->server_ = builder.BuildAndStart();
  if (t->server_ == nullptr || t->endpoints_.grpc_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot start the parameter server on ", grpc_address));
  }

  absl::StatusOr<std::unique_ptr<TcpReferenceServer>> tcp =
      TcpReferenceServer::Listen(options.host, PortAt(options.base_port, 1),
                                 options.max_bytes,
                                 options.tcp_socket_buffer_bytes);
  if (!tcp.ok()) return tcp.status();
  t->tcp_ = *std::move(tcp);
  t->endpoints_.tcp_port = t->tcp_->port();

  DensePlaneServerOptions plane_options;
  plane_options.host = options.host;
  // The TLS plane first: the service announces the plane started last, the
  // plain one, and the TLS client is told its port directly.
  if (options.tls.has_value()) {
    DensePlaneServerOptions tls_options = plane_options;
    tls_options.port = PortAt(options.base_port, 3);
    tls_options.tls = options.tls;
    absl::StatusOr<std::unique_ptr<DensePlaneServer>> started =
        DensePlaneServer::Start(&t->core_, tls_options);
    if (!started.ok()) return started.status();
    t->tls_plane_ = *std::move(started);
    t->endpoints_.tls_plane_port = t->tls_plane_->port();
  }
  plane_options.port = PortAt(options.base_port, 2);
  absl::StatusOr<std::unique_ptr<DensePlaneServer>> plane =
      DensePlaneServer::Start(&t->core_, plane_options);
  if (!plane.ok()) return plane.status();
  t->plane_ = *std::move(plane);
  return t;
}

TransportServer::~TransportServer() {
  tcp_.reset();
  plane_.reset();
  tls_plane_.reset();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(5));
  }
}

absl::Status TransportServer::WaitForClient() { return tcp_->Wait(); }

}  // namespace bench
}  // namespace tessera
