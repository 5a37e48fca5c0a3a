#ifndef TESSERA_TESTS_KEPT_KEY_H_
#define TESSERA_TESTS_KEPT_KEY_H_

#include <filesystem>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessera {

// A file's identity for a kept key: its path, modification time and size
// ("absent" when it cannot be read), so that a rebuild of it changes the
// key.
inline std::string KeptFileIdentity(const std::filesystem::path& file) {
  namespace fs = std::filesystem;
  std::error_code time_error;
  std::error_code size_error;
  const auto mtime = fs::last_write_time(file, time_error);
  const auto size = fs::file_size(file, size_error);
  if (time_error || size_error) return absl::StrCat(file.string(), "=absent");
  return absl::StrCat(file.string(), "=", mtime.time_since_epoch().count(), "/",
                      size);
}

// The files whose rebuild makes kept files stale: the running test
// executable first (its constants, such as worker and example counts, and
// the code that fills the kept files are part of every job it keeps, and
// no job string names them all), then `binaries`.
inline std::vector<std::filesystem::path> KeptKeyFiles(
    const std::vector<std::filesystem::path>& binaries) {
  // stat() of /proc/self/exe reads the running file even when a rebuild
  // has replaced the one at its path; its link names the path.
  std::vector<std::filesystem::path> files = {"/proc/self/exe"};
  std::error_code error;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) files.push_back(path);
  files.insert(files.end(), binaries.begin(), binaries.end());
  return files;
}

// The name of what is kept for `job` (which must name everything that
// decides it besides the files) in a process of this test executable with
// these `binaries`: `prefix` and a hash of the job and every file's
// identity.
inline std::string KeptKey(const std::string& prefix, const std::string& job,
                           const std::vector<std::filesystem::path>& binaries) {
  std::string key = job;
  for (const auto& file : KeptKeyFiles(binaries)) {
    absl::StrAppend(&key, "\n", KeptFileIdentity(file));
  }
  return absl::StrCat(prefix, std::hash<std::string>()(key));
}

}  // namespace tessera

#endif  // TESSERA_TESTS_KEPT_KEY_H_
