// Which transport carries a worker's tensor bytes: the gRPC calls of the
// ParameterServer service, or the plain TCP data plane that service
// announces (docs/design.md, "Bytes and control travel apart"). Mains parse
// --data_plane with ParseDataPlaneKind and pass the result down.
#ifndef TESSERA_COMMON_DATA_PLANE_DATA_PLANE_KIND_H_
#define TESSERA_COMMON_DATA_PLANE_DATA_PLANE_KIND_H_

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tessera {

enum class DataPlaneKind { kGrpc, kTcp };

inline const char* DataPlaneName(DataPlaneKind kind) {
  return kind == DataPlaneKind::kTcp ? "tcp" : "grpc";
}

// "grpc" or "tcp"; InvalidArgument naming `flag` otherwise.
inline absl::StatusOr<DataPlaneKind> ParseDataPlaneKind(
    absl::string_view text, absl::string_view flag = "--data_plane") {
  if (text == "grpc") return DataPlaneKind::kGrpc;
  if (text == "tcp") return DataPlaneKind::kTcp;
  return absl::InvalidArgumentError(
      absl::StrCat(flag, "=", text, ": the data plane is \"grpc\" or \"tcp\""));
}

}  // namespace tessera

#endif  // TESSERA_COMMON_DATA_PLANE_DATA_PLANE_KIND_H_
