// Files that a crash of the process or of the machine leaves either whole
// and new, or whole and old: written under a temporary name in the same
// folder, flushed to the disk, renamed into place, and the folder flushed
// so the rename itself survives a power cut.

#ifndef TESSERA_COMMON_ATOMIC_FILE_H_
#define TESSERA_COMMON_ATOMIC_FILE_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tessera {

// The steps of WriteFileAtomically, in order.
enum class AtomicWriteStep {
  kCreate,    // the temporary file, beside the target
  kWrite,     // the contents
  kSyncFile,  // fsync of the temporary file
  kClose,
  kRename,      // onto the target
  kSyncFolder,  // fsync of the folder, which makes the rename durable
};

struct AtomicWriteOptions {
  // The new file's mode, exactly (the umask does not apply).
  mode_t mode = 0644;
  // Tests only: this step fails as if its system call had, with EIO.
  std::optional<AtomicWriteStep> TEST_fail_at;
};

// Replaces `path` with `contents`. On any error the old file, if there was
// one, is intact, the temporary file is gone, and the error names the step
// and the file: DataLoss for a failed write, flush or rename (a retry may
// do), PermissionDenied or NotFound when the folder refuses or is missing
// (the user's to fix). A failure of the last step (the folder's fsync)
// leaves the new file in place, and says that the rename may not survive a
// power cut.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents,
                                 const AtomicWriteOptions& options = {});

// Puts `written`, a file that another writer (a library that writes its
// own file, such as libzip) has written and closed beside `path`, in place
// of `path` as WriteFileAtomically does from its fsync on: fsync of
// `written`, rename, fsync of the folder, with the same errors. On any
// error before the rename `written` is removed and `path` is intact.
absl::Status CommitFileAtomically(const std::string& written,
                                  const std::string& path);

// Flushes `path`'s data to the disk, and the folder holding it (so that a
// file just created survives a power cut too): for append-only logs that a
// stream writes, at the points (an epoch's end) where losing them would
// lose a record of work done. Errors as SyncParentFolder's.
absl::Status SyncFileAndFolder(const std::string& path);

// Flushes the folder holding `path` to the disk, so that a file created or
// renamed there survives a power cut (for writers that stream their file
// and rename it themselves, as the checkpoint writer does).
absl::Status SyncParentFolder(const std::string& path);

}  // namespace tessera

#endif  // TESSERA_COMMON_ATOMIC_FILE_H_
