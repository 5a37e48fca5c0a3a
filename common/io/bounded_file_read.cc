#include "common/io/bounded_file_read.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera {

absl::StatusOr<std::string> ReadBoundedFile(const std::string& path,
                                            size_t max_bytes,
                                            absl::string_view what) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(
      std::fopen(path.c_str(), "rb"), &std::fclose);
  if (file == nullptr) {
    const int error = errno;  // Read before StrCat can clobber it.
    return absl::ErrnoToStatus(error, absl::StrCat(what, ": cannot be read"));
  }
  std::string text;
  char buffer[4096];
  while (true) {
    // One byte past the cap is enough to tell the file is too large; asking
    // for no more keeps a huge cap's last read small too.
    const size_t want = std::min(sizeof(buffer), max_bytes + 1 - text.size());
    const size_t n = std::fread(buffer, 1, want, file.get());
    text.append(buffer, n);
    if (text.size() > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " is larger than ", max_bytes, " bytes, the most accepted"));
    }
    if (n < want) break;
  }
  if (std::ferror(file.get())) {
    const int error = errno;
    return absl::ErrnoToStatus(error, absl::StrCat(what, ": read failed"));
  }
  return text;
}

}  // namespace tessera
