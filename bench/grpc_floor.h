#ifndef TESSERA_BENCH_GRPC_FLOOR_H_
#define TESSERA_BENCH_GRPC_FLOOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/channel.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/impl/rpc_method.h"

namespace tessera {
namespace bench {

// The transport bench's second reference: what gRPC itself costs on this
// machine. The same calls as a dense push and pull (a client stream of
// chunks answered by one message; one request answered by a stream of
// chunks), over the same channel, at the same chunk size, with nothing done
// with the bytes on either end: the server drops what it reads and writes
// slices of a buffer it never touches, the client sends from and drops into
// nothing. A parameter server can come near this figure, never above it;
// the gap between it and raw TCP is gRPC's (HTTP/2 framing, its threads,
// its receive slices), the gap between it and tessera is Tessera's.

// The server half. Register it on a ServerBuilder with
// RegisterCallbackGenericService; it answers only its two methods
// (UNIMPLEMENTED for any other) and must outlive the server.
class GrpcFloorService : public grpc::CallbackGenericService {
 public:
  static constexpr const char* kPush = "/tessera.bench.GrpcFloor/Push";
  static constexpr const char* kPull = "/tessera.bench.GrpcFloor/Pull";

  // Pulls of up to max_bytes, sent in chunks of chunk_bytes.
  GrpcFloorService(int64_t max_bytes, int64_t chunk_bytes);

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

 private:
  const int64_t chunk_bytes_;
  const std::vector<char> payload_;  // what pulls send, never written
};

// The client half, on one channel.
//
// Thread safety: calls may run concurrently; each owns its call state.
class GrpcFloorClient {
 public:
  // Pushes of up to max_bytes, in chunks of chunk_bytes.
  GrpcFloorClient(std::shared_ptr<grpc::Channel> channel, int64_t max_bytes,
                  int64_t chunk_bytes);

  // REQUIRES: 0 < bytes <= max_bytes.
  absl::Status Push(int64_t bytes);
  absl::Status Pull(int64_t bytes);

 private:
  const std::shared_ptr<grpc::Channel> channel_;
  const int64_t chunk_bytes_;
  const std::vector<char> payload_;  // what pushes send, never written
  const grpc::internal::RpcMethod push_method_;
  const grpc::internal::RpcMethod pull_method_;
};

}  // namespace bench
}  // namespace tessera

#endif  // TESSERA_BENCH_GRPC_FLOOR_H_
