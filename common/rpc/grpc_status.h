#ifndef TESSERA_COMMON_GRPC_STATUS_H_
#define TESSERA_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace tessera {

// Errors are absl::Status inside a process and grpc::Status on the wire;
// these two functions are the only place the codes are mapped.
grpc::Status ToGrpcStatus(const absl::Status& status);

// `peer` (for example "ps 1 (127.0.0.1:4000) PullDense") prefixes the
// message so an error says which remote call failed.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view peer);

}  // namespace tessera

#endif  // TESSERA_COMMON_GRPC_STATUS_H_
