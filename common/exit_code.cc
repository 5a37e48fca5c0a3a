#include "common/exit_code.h"

#include <cstdio>

namespace tessera {

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitDone;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kUnauthenticated:
      return kExitUserError;
    default:
      // DataLoss stays here too: a damaged checkpoint or message is worth
      // a restart, which resumes from an older checkpoint or resends it.
      return kExitRetryable;
  }
}

int ExitWith(absl::string_view program, const absl::Status& status) {
  std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(program.size()),
               program.data(), static_cast<int>(status.message().size()),
               status.message().data());
  return ExitCodeFor(status);
}

}  // namespace tessera
