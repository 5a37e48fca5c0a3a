#include "common/io/line_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tessera {
namespace {

absl::Status SystemError(absl::string_view what, const std::string& path) {
  const int error = errno;
  const std::string text =
      absl::StrCat(what, " ", path, " failed: ", std::strerror(error));
  if (error == EACCES || error == EPERM) {
    return absl::PermissionDeniedError(text);
  }
  if (error == ENOENT || error == ENOTDIR) return absl::NotFoundError(text);
  return absl::DataLossError(text);
}

// Closes `fd` when it goes out of scope.
class FileCloser {
 public:
  explicit FileCloser(int fd) : fd_(fd) {}
  ~FileCloser() { ::close(fd_); }
  FileCloser(const FileCloser&) = delete;
  FileCloser& operator=(const FileCloser&) = delete;

 private:
  const int fd_;
};

// The torn tail of the open file `fd` of `size` bytes: how many bytes
// follow its last '\n'. Reads backwards in blocks, so that a long log costs
// only its last line.
absl::StatusOr<int64_t> TornTailBytes(int fd, int64_t size,
                                      const std::string& path) {
  constexpr int64_t kBlock = 4096;
  char buffer[kBlock];
  int64_t end = size;
  while (end > 0) {
    const int64_t begin = end > kBlock ? end - kBlock : 0;
    const ssize_t got = ::pread(fd, buffer, end - begin, begin);
    if (got != end - begin) {
      if (got >= 0) errno = EIO;
      return SystemError("reading", path);
    }
    for (int64_t i = end - begin - 1; i >= 0; --i) {
      if (buffer[i] == '\n') return size - (begin + i + 1);
    }
    end = begin;
  }
  return size;  // no whole line at all
}

}  // namespace

absl::StatusOr<int64_t> CutTornLastLine(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    // A log that is a link to a device may refuse O_RDWR; nothing to cut.
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return 0;
    return SystemError("opening", path);
  }
  FileCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return SystemError("reading the size of", path);
  if (!S_ISREG(st.st_mode) || st.st_size == 0) return 0;
  absl::StatusOr<int64_t> torn = TornTailBytes(fd, st.st_size, path);
  if (!torn.ok() || *torn == 0) return torn;
  if (::ftruncate(fd, st.st_size - *torn) != 0) {
    return SystemError("cutting the torn last line of", path);
  }
  return torn;
}

absl::Status AppendWholeLine(const std::string& path, absl::string_view line) {
  if (absl::StatusOr<int64_t> cut = CutTornLastLine(path); !cut.ok()) {
    return cut.status();
  }
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return SystemError("opening", path);
  FileCloser closer(fd);
  // One write, so that a kill leaves the line either whole or torn (and
  // cut by the next writer), never interleaved with another's.
  const std::string whole = absl::StrCat(line, "\n");
  const ssize_t written = ::write(fd, whole.data(), whole.size());
  if (written != static_cast<ssize_t>(whole.size())) {
    if (written >= 0) errno = ENOSPC;
    return SystemError("writing", path);
  }
  return absl::OkStatus();
}

}  // namespace tessera
