#include "data/io/gz_file.h"

#include <errno.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera {

absl::StatusOr<gzFile> OpenGzFile(const std::string& path, const char* mode) {
  errno = 0;
  gzFile f = gzopen(path.c_str(), mode);
  if (f == nullptr) {
    // errno is 0 when zlib itself failed (out of memory) rather than open().
    if (errno == 0) return absl::InternalError(absl::StrCat(path, ": gzopen"));
    const bool writes =
        std::strchr(mode, 'w') != nullptr || std::strchr(mode, 'a') != nullptr;
    return absl::ErrnoToStatus(
        errno,
        absl::StrCat(path, writes ? ": cannot create" : ": cannot open"));
  }
  gzbuffer(f, 1 << 20);
  return f;
}

}  // namespace tessera
