#include "deploy/local/run_folder.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/io/atomic_file.h"

namespace tessera {
namespace {

std::string Timestamp() {
  const time_t now = time(nullptr);
  struct tm local;
  localtime_r(&now, &local);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &local);
  return buf;
}

}  // namespace

absl::StatusOr<std::string> MakeRunDir(const std::string& requested) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path dir;
  if (!requested.empty()) {
    dir = fs::absolute(requested, error);
    if (!error) fs::create_directories(dir, error);
  } else {
    const fs::path base = fs::absolute(fs::path("runs") / Timestamp(), error);
    dir = base;
    if (!error) fs::create_directories(base.parent_path(), error);
    // create_directory() is the atomic claim, so two launches cannot both
    // pick one name.
    for (int i = 2; !error && !fs::create_directory(dir, error) && !error;
         ++i) {
      dir = fs::path(absl::StrCat(base.string(), "-", i));
    }
  }
  if (error) {
    return absl::ErrnoToStatus(
        error.value(), absl::StrCat("cannot create run folder ", dir.string()));
  }
  return dir.lexically_normal().string();
}

absl::Status CheckBinaries(const std::vector<std::string>& binaries) {
  std::vector<std::string> problems;
  for (const std::string& binary : binaries) {
    struct stat st;
    if (stat(binary.c_str(), &st) != 0) {
      problems.push_back(absl::StrCat(binary, " (missing)"));
    } else if (!S_ISREG(st.st_mode) || access(binary.c_str(), X_OK) != 0) {
      problems.push_back(absl::StrCat(binary, " (not executable)"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat(
      "cannot run ", absl::StrJoin(problems, ", "),
      "; build them first or point --bin_dir at the build root (or a "
      "bundle's bin/)"));
}

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::trunc);
  out << contents;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status WriteWithMode(const std::string& path, const std::string& contents,
                           mode_t mode) {
  AtomicWriteOptions options;
  options.mode = mode;
  return WriteFileAtomically(path, contents, options);
}

}  // namespace tessera
