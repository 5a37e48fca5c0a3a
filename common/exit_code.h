// The exit codes of every Tessera binary, in one place (docs/exit_codes.md
// is the user's table). Launchers act on them: tessera_local and a
// Kubernetes restart policy start a process again after exit 1 but not
// after exit 2, where a restart would fail the same way.

#ifndef TESSERA_COMMON_EXIT_CODE_H_
#define TESSERA_COMMON_EXIT_CODE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tessera {

inline constexpr int kExitDone = 0;
// A failure a retry might fix: a process or the network went away, a
// deadline passed, a file could not be written (disk full), a bug.
inline constexpr int kExitRetryable = 1;
// The user's mistake about their files, flags or job: the same command
// fails the same way until they change it.
inline constexpr int kExitUserError = 2;
// An operator stopped the job before its epochs were all trained
// (tessera_ctl stop): done as asked, not failed, and not to be restarted.
inline constexpr int kExitStopped = 3;
// Stopped by SIGINT, SIGTERM or SIGHUP (128 + SIGINT, as a shell reports).
inline constexpr int kExitInterrupted = 130;

// kExitDone for OK; kExitUserError for what the user must fix
// (InvalidArgument, NotFound, AlreadyExists, PermissionDenied,
// FailedPrecondition, OutOfRange, Unimplemented, Unauthenticated);
// kExitRetryable for everything else (Unavailable, DeadlineExceeded,
// Aborted, Cancelled, ResourceExhausted, DataLoss, Internal, Unknown).
int ExitCodeFor(const absl::Status& status);

// Prints "<program>: <message>" on stderr and returns ExitCodeFor(status):
// the one line a main writes before it returns a failure.
int ExitWith(absl::string_view program, const absl::Status& status);

}  // namespace tessera

#endif  // TESSERA_COMMON_EXIT_CODE_H_
