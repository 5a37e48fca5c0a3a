#include "common/io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status StepError(const std::string& what, int error) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  if (error == ENOENT || error == ENOTDIR) return absl::NotFoundError(message);
  if (error == EACCES || error == EPERM || error == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  return absl::DataLossError(message);
}

}  // namespace

absl::Status SyncParentFolder(const std::string& path) {
  const std::string folder = FolderOf(path);
  const int fd = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return StepError(absl::StrCat("cannot open folder ", folder), errno);
  const int rc = fsync(fd);
  const int error = errno;
  close(fd);
  if (rc != 0)
    return StepError(absl::StrCat("cannot fsync folder ", folder), error);
  return absl::OkStatus();
}

absl::Status SyncFileAndFolder(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return StepError(absl::StrCat("cannot open ", path), errno);
  const int rc = fsync(fd);
  const int error = errno;
  close(fd);
  if (rc != 0) return StepError(absl::StrCat("cannot fsync ", path), error);
  return SyncParentFolder(path);
}

absl::Status CommitFileAtomically(const std::string& written,
                                  const std::string& path) {
  auto give_up = [&](const std::string& what, int error) {
    unlink(written.c_str());
    return StepError(absl::StrCat(what, " (", path, " is unchanged)"), error);
  };
  const int fd = open(written.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return give_up(absl::StrCat("cannot open ", written), errno);
  if (fsync(fd) != 0) {
    const int error = errno;
    close(fd);
    return give_up(absl::StrCat("cannot fsync ", written), error);
  }
  if (close(fd) != 0) {
    return give_up(absl::StrCat("cannot close ", written), errno);
  }
  if (rename(written.c_str(), path.c_str()) != 0) {
    return give_up(absl::StrCat("cannot rename ", written, " to ", path),
                   errno);
  }
  if (absl::Status s = SyncParentFolder(path); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat(s.message(), " after writing ", path,
                                     " (the new file may not survive a "
                                     "power cut)"));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents,
                                 const AtomicWriteOptions& options) {
  auto fails = [&](AtomicWriteStep step) {
    if (options.TEST_fail_at == step) {
      errno = EIO;
      return true;
    }
    return false;
  };
  const std::string tmp = path + ".tmp";
  unlink(tmp.c_str());  // left by a crash: this writer owns the name
  const int fd =
      fails(AtomicWriteStep::kCreate)
          ? -1
          : open(tmp.c_str(),
                 O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                 options.mode);
  if (fd < 0) return StepError(absl::StrCat("cannot create ", tmp), errno);
  auto give_up = [&](const std::string& what) {
    const int error = errno;
    close(fd);
    unlink(tmp.c_str());
    return StepError(absl::StrCat(what, " (", path, " is unchanged)"), error);
  };
  // open() applies the umask; the mode must be exact either way.
  if (fchmod(fd, options.mode) != 0) {
    return give_up(absl::StrCat("cannot set the mode of ", tmp));
  }
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n =
        fails(AtomicWriteStep::kWrite)
            ? -1
            : write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return give_up(absl::StrCat("cannot write ", tmp));
    done += static_cast<size_t>(n);
  }
  if (fails(AtomicWriteStep::kSyncFile) || fsync(fd) != 0) {
    return give_up(absl::StrCat("cannot fsync ", tmp));
  }
  bool closed = close(fd) == 0;
  if (fails(AtomicWriteStep::kClose)) closed = false;  // errno is EIO
  if (!closed) {
    const int error = errno;
    unlink(tmp.c_str());
    return StepError(
        absl::StrCat("cannot close ", tmp, " (", path, " is unchanged)"),
        error);
  }
  if (fails(AtomicWriteStep::kRename) ||
      rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(tmp.c_str());
    return StepError(absl::StrCat("cannot rename ", tmp, " to ", path, " (",
                                  path, " is unchanged)"),
                     error);
  }
  if (fails(AtomicWriteStep::kSyncFolder)) {
    return StepError(absl::StrCat("cannot fsync folder ", FolderOf(path),
                                  " after writing ", path,
                                  " (the new file may not survive a power "
                                  "cut)"),
                     errno);
  }
  if (absl::Status s = SyncParentFolder(path); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat(s.message(), " after writing ", path,
                                     " (the new file may not survive a "
                                     "power cut)"));
  }
  return absl::OkStatus();
}

}  // namespace tessera
