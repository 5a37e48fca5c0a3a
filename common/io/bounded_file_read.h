// Reading a whole file that a user named (a flag, an environment variable)
// without trusting its size: a mistaken path such as /dev/zero, a log or a
// device must fail fast with an error naming it, not read until memory runs
// out.
//
// Contract:
//  - Reads at most max_bytes + 1 bytes whatever the file holds, and holds at
//    most that much in memory.
//  - Thread-safe; no state.
#ifndef TESSERA_COMMON_BOUNDED_FILE_READ_H_
#define TESSERA_COMMON_BOUNDED_FILE_READ_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

// Returns the contents of the file at `path` when it holds at most
// `max_bytes` bytes. `what` names the file at the start of every error
// message, e.g. "--job_token_file=/x" or "job file /x".
//
// Errors:
//  - the file cannot be opened: the code errno gives (NotFound for a missing
//    file, PermissionDenied, ...), "<what>: cannot be read: <reason>";
//  - it holds more than `max_bytes` bytes: InvalidArgument,
//    "<what> is larger than <max_bytes> bytes, the most accepted";
//  - reading fails (e.g. `path` is a directory): errno's code,
//    "<what>: read failed: <reason>".
absl::StatusOr<std::string> ReadBoundedFile(const std::string& path,
                                            size_t max_bytes,
                                            absl::string_view what);

}  // namespace tessera

#endif  // TESSERA_COMMON_BOUNDED_FILE_READ_H_
