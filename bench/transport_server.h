#ifndef TESSERA_BENCH_TRANSPORT_SERVER_H_
#define TESSERA_BENCH_TRANSPORT_SERVER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/grpc_floor.h"
#include "bench/tcp_reference.h"
#include "common/rpc/tls_credentials.h"
#include "grpcpp/server.h"
#include "ps_server/data_plane/dense_plane_server.h"
#include "ps_server/ps_service.h"
#include "ps_server/shard_store.h"

namespace tessera {
namespace bench {

// Where bench_transport's client finds the server half.
struct TransportEndpoints {
  std::string host;        // an IPv4 address
  int grpc_port = 0;       // the parameter server's service and the floor
  int tcp_port = 0;        // the raw TCP reference
  int tls_plane_port = 0;  // the data plane over TLS; 0: none
};

struct TransportServerOptions {
  // An IPv4 address to listen on.
  std::string host = "127.0.0.1";
  // 0: every port ephemeral. Otherwise gRPC on base_port, the raw TCP
  // reference on base_port + 1, the data plane on base_port + 2 (the
  // service announces it) and its TLS twin on base_port + 3, so that a
  // client in another process derives them all from one address.
  int base_port = 0;
  int64_t max_bytes = 0;    // the largest push or pull asked for
  int64_t chunk_bytes = 0;  // the service's and the floor's chunk size
  // Integer channel arguments added to tessera's own (tuning experiments).
  std::vector<std::pair<std::string, int>> grpc_args;
  // Starts the TLS data plane with these files; nullopt: none.
  std::optional<TlsFiles> tls;
  // SO_SNDBUF/SO_RCVBUF of the raw TCP reference; 0: system defaults.
  int tcp_socket_buffer_bytes = 0;
};

// The server half of bench_transport: one parameter server (its gRPC
// service and its TCP data plane, plain and optionally over TLS, on one
// ShardStore), the gRPC floor service on the same gRPC server, and the raw
// TCP reference's server. The client half creates the shards it times.
//
// Thread safety: WaitForClient and the destructor must not run
// concurrently; the servers run their own threads.
class TransportServer {
 public:
  static absl::StatusOr<std::unique_ptr<TransportServer>> Start(
      const TransportServerOptions& options);

  TransportServer(const TransportServer&) = delete;
  TransportServer& operator=(const TransportServer&) = delete;
  // Stops every server (a call in flight fails).
  ~TransportServer();

  const TransportEndpoints& endpoints() const { return endpoints_; }

  // Blocks until a client of the raw TCP reference has come and gone, the
  // end of a bench_transport client run; its error, if one ended it.
  absl::Status WaitForClient();

 private:
  TransportServer() = default;

  TransportEndpoints endpoints_;
  ShardStore store_;
  PsCore core_{&store_};
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<GrpcFloorService> floor_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<DensePlaneServer> tls_plane_;
  std::unique_ptr<DensePlaneServer> plane_;
  std::unique_ptr<TcpReferenceServer> tcp_;
};

}  // namespace bench
}  // namespace tessera

#endif  // TESSERA_BENCH_TRANSPORT_SERVER_H_
