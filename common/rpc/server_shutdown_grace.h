// How long a stopping process's gRPC server lets the calls in flight finish
// before it cancels them (grpc::Server::Shutdown's deadline), owned here for
// the three mains that serve: the parameter server, the worker and the
// coordinator.
//
// A parameter server or worker stops on a request or a signal while a peer
// may still be pushing, pulling or reducing: it gives those calls
// kServerShutdownGrace. The coordinator's server stops once training has
// ended (or failed), when what it serves is status and control, and keeps
// its shorter kCoordinatorShutdownGrace.
#ifndef TESSERA_COMMON_RPC_SERVER_SHUTDOWN_GRACE_H_
#define TESSERA_COMMON_RPC_SERVER_SHUTDOWN_GRACE_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"

namespace tessera {

inline constexpr absl::Duration kServerShutdownGrace = absl::Seconds(5);
inline constexpr absl::Duration kCoordinatorShutdownGrace = absl::Seconds(2);

// Stops `server`: no new calls, the ones in flight get `grace` to finish,
// then are cancelled. Blocks until they have. REQUIRES: server != nullptr.
inline void ShutdownServer(grpc::Server* server, absl::Duration grace) {
  server->Shutdown(absl::ToChronoTime(absl::Now() + grace));
}

}  // namespace tessera

#endif  // TESSERA_COMMON_RPC_SERVER_SHUTDOWN_GRACE_H_
