// The launcher's files on disk: the run folder every process logs into,
// the check that the binaries it starts are there, and whole-file writes.
#ifndef TESSERA_DEPLOY_LOCAL_RUN_FOLDER_H_
#define TESSERA_DEPLOY_LOCAL_RUN_FOLDER_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {

// Creates the run folder and returns its absolute path: `requested` with its
// parents, or runs/<YYYYmmdd-HHMMSS> under the current directory when
// `requested` is empty. The default name gets a suffix (-2, -3, ...) if
// taken, so two launches in the same second keep separate logs. The error
// carries errno's code: a folder under a file or one the user may not write
// is their mistake, a full disk is not.
absl::StatusOr<std::string> MakeRunDir(const std::string& requested);

// OK when every path is an executable regular file; NotFound naming each
// one that is missing or not executable otherwise, with the way to fix it.
absl::Status CheckBinaries(const std::vector<std::string>& binaries);

// Writes `contents` to `path` in place (truncating); Internal naming the
// path when it cannot.
absl::Status WriteFile(const std::string& path, const std::string& contents);

// Writes `contents` whole (common/io/atomic_file.h) with exactly `mode`, so a
// reader never sees a partial file and an older file's looser mode never
// carries over.
absl::Status WriteWithMode(const std::string& path, const std::string& contents,
                           mode_t mode);

}  // namespace tessera

#endif  // TESSERA_DEPLOY_LOCAL_RUN_FOLDER_H_
